// Package runner is the command-line glue of a towerflow program, the
// part every training command writes the same way: the standard flags
// (-model_dir, -serve, -towers, registered by Flags.Register and checked
// by Flags.Check), the devices -towers names (Devices), a logger on
// standard error (Logger), an Estimator configuration that logs every N
// steps, or draws a progress bar when standard error is a terminal
// (Config), joining the processes mpirun started (Processes), checks of a
// program's own flags that name the flag and what it may be (Check,
// Usage), and Main, which trains with a context that an interrupt
// (Ctrl-C) or SIGTERM cancels — the Estimator then saves a checkpoint of
// the last completed step, so a later run with the same -model_dir
// continues from it — and with -serve exports the trained model and
// serves it with TensorFlow Serving's REST API (Serving).
//
// The commands under examples/ use it; the package example is a whole
// program.
package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/serving"
	"github.com/towerflow/towerflow/towers"
)

// Flags are the standard flags of a training command.
type Flags struct {
	// ModelDir is -model_dir: checkpoints and history; empty keeps the run
	// in memory.
	ModelDir string
	// Serve is -serve: the address to serve the trained model on.
	Serve string
	// Towers is -towers: the number of towers, 0 for one per local device.
	Towers int
}

// Register adds -model_dir, -serve and -towers to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.ModelDir, "model_dir", "", "directory for checkpoints and history; empty keeps the run in memory")
	fs.StringVar(&f.Serve, "serve", "", "after training, export and serve on this address (needs -model_dir; listened on from the start), e.g. localhost:8501")
	fs.IntVar(&f.Towers, "towers", 0, "towers to train with: 0 for one per local device (one per core)")
}

// MaxTowers is the most towers -towers may ask for.
const MaxTowers = 1024

// Check checks the flags' values together.
func (f *Flags) Check() error {
	var c Check
	if f.Serve != "" && f.ModelDir == "" {
		c.Add(errors.New("-serve needs -model_dir"))
	}
	c.Int("towers", int64(f.Towers), 0, MaxTowers)
	return c.Err()
}

// Listen listens on -serve's address (nil without -serve): a program
// that serves after training listens first, so that an address that
// cannot be served (a typo, a port in use) is an error before the
// training, and connections made during it wait until serving starts.
func (f *Flags) Listen() (net.Listener, error) {
	if f.Serve == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", f.Serve)
	if err != nil {
		return nil, fmt.Errorf("-serve %s: %w", f.Serve, err)
	}
	return l, nil
}

// Devices returns the devices of n towers: towers.LocalDevices() (one CPU
// device per core) for 0, else n CPU devices (more than the cores is
// allowed, and logged when training starts).
func Devices(n int) ([]towers.Device, error) {
	local := towers.LocalDevices()
	switch {
	case n < 0:
		return nil, fmt.Errorf("%d towers, want 0 or more", n)
	case n == 0:
		return local, nil
	case towers.NumGPUs() == 0:
		return towers.CPUs(n), nil
	case n > len(local):
		return nil, fmt.Errorf("%d towers, but there are %d GPUs", n, len(local))
	}
	return local[:n], nil
}

// Logger returns a program's logger: text on standard error.
func Logger() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }

// Config returns an Estimator configuration: log to log every
// logEvery steps, or show a progress bar instead when standard error is
// an interactive terminal.
func Config(modelDir string, seed uint64, logEvery int, log *slog.Logger) estimator.RunConfig {
	cfg := estimator.RunConfig{ModelDir: modelDir, Seed: seed, LogEvery: logEvery, Logger: log}
	if term.IsTerminal(int(os.Stderr.Fd())) && os.Getenv("TERM") != "dumb" {
		cfg.Progress = os.Stderr
	}
	return cfg
}

// Main runs a program's command after its flags are parsed: train with a
// context that an interrupt (Ctrl-C) or SIGTERM cancels (see
// SignalContext), then, with -serve, serve until one of them. -serve's
// address is listened on before the training: one that cannot be (a
// typo, a port in use) is an error at once, and connections made during
// the training wait until serving starts. Bad flags exit the process
// with status 2 (see Usage), an error with 1, each printed after name on
// standard error.
func Main(name string, f Flags, train func(ctx context.Context) error, serve Serving) {
	Usage(name, f.Check())
	if err := run(f, train, serve); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// run is Main after the flags' check: train, then serve with -serve. The
// address is listened on before the training, so that one that cannot be
// (a typo, a port in use) is an error before the training, not after it.
func run(f Flags, train func(ctx context.Context) error, serve Serving) error {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	l, err := f.Listen()
	if err != nil {
		return err
	}
	if l != nil {
		defer l.Close() // closed by Serve when it serves
	}
	err = train(ctx)
	if err == nil && l != nil {
		serve.ModelDir = f.ModelDir
		err = serve.Serve(ctx, l)
	}
	if cause := context.Cause(ctx); err != nil && errors.As(cause, new(SignalError)) {
		return fmt.Errorf("%w; %w", cause, err)
	}
	return err
}

// stopSignals are the signals that cancel SignalContext's context.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// notify is signal.Notify; tests replace it to deliver signals through
// the channel it is given.
var notify = signal.Notify

// SignalError is the cause (context.Cause) of a SignalContext's
// cancellation: the signal that stopped the run.
type SignalError struct{ Signal os.Signal }

func (e SignalError) Error() string { return "stopped by signal " + e.Signal.String() }

// SignalContext returns a context that the first interrupt (Ctrl-C) or
// SIGTERM cancels, with a SignalError as its cause, and the function that
// releases it. Training with it (estimator.Estimator.Train) stops after
// the step under way and saves a checkpoint of it in the model directory.
// After the first signal, or once released, those signals take their
// default action again: a second Ctrl-C ends the process at once.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	notify(ch, stopSignals...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-ch:
			cancel(SignalError{sig})
		case <-ctx.Done():
		}
		signal.Stop(ch)
	}()
	return ctx, func() {
		cancel(context.Canceled)
		<-done
	}
}

// Processes joins the processes mpirun started this one among
// (collective.Join) and returns their group, or nil when it runs alone,
// with the function that leaves it. A program that cannot run under
// mpirun (the build has no MPI) or is asked to serve there exits with
// status 2, its error printed after name.
func Processes(name string, f Flags) (procs collective.Comm, leave func()) {
	comm, err := collective.Join()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	leave = func() { comm.Close() }
	if comm.Size() < 2 {
		return nil, leave
	}
	if f.Serve != "" {
		fmt.Fprintf(os.Stderr, "%s: -serve runs in one process, not under mpirun\n", name)
		os.Exit(2)
	}
	return comm, leave
}

// Serving is what a program serves: the newest export of its model
// directory, as model Name.
type Serving struct {
	// Name is the model's name in the URLs (/v1/models/Name:predict).
	Name string
	// ModelDir is the model directory: its latest checkpoint is exported
	// to ModelDir/export (Main sets it from -model_dir).
	ModelDir string
	// Model returns a new model of the program, for the export and the
	// server each.
	Model func() (*replicate.Model, error)
	// Inputs are the served model's inputs.
	Inputs estimator.ServingInput
	// Try is a command that queries the server on an address, for the
	// log: fmt.Sprintf(Try, addr).
	Try string
	// Logger gets the export's and the server's messages; nil logs none.
	Logger *slog.Logger
}

// ExportDir returns where exports go: ModelDir/export.
func (s Serving) ExportDir() string { return filepath.Join(s.ModelDir, "export") }

// Server exports the latest checkpoint of the model directory to
// ExportDir (keeping the newest 3 versions) and returns a server of the
// newest export, and the directory of the new version.
func (s Serving) Server(ctx context.Context) (*serving.Server, string, error) {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m, err := s.Model()
	if err != nil {
		return nil, "", err
	}
	est, err := estimator.New(m, estimator.RunConfig{ModelDir: s.ModelDir, LogEvery: -1, Logger: log})
	if err != nil {
		return nil, "", err
	}
	defer est.Close()
	dir, err := est.Export(ctx, s.ExportDir(), s.Inputs, estimator.KeepVersions(3))
	if err != nil {
		return nil, "", err
	}
	if m, err = s.Model(); err != nil {
		return nil, "", err
	}
	srv, err := serving.NewServer([]serving.ModelConfig{{Name: s.Name, BaseDir: s.ExportDir(), Model: m}}, serving.Config{Logger: log})
	if err != nil {
		return nil, "", err
	}
	return srv, dir, nil
}

// ListenAndServe exports and serves (see Server) on addr until ctx is
// done, picking up newer exports every 10 seconds.
func (s Serving) ListenAndServe(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serving: listen: %w", err)
	}
	return s.Serve(ctx, l)
}

// Serve is ListenAndServe on a listener; it closes l.
func (s Serving) Serve(ctx context.Context, l net.Listener) error {
	srv, dir, err := s.Server(ctx)
	if err != nil {
		l.Close()
		return err
	}
	defer srv.Close()
	go srv.Watch(ctx, 10*time.Second)
	if s.Logger != nil {
		addr := l.Addr().String()
		s.Logger.Info("serving", "export", dir, "addr", addr, "try", fmt.Sprintf(s.Try, addr))
	}
	return srv.Serve(ctx, l)
}
