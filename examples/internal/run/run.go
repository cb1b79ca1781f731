// Package run is what the examples' commands share: the flags every
// example has (-model_dir, -serve, -towers), the devices -towers names, an
// Estimator configuration that logs to standard error (a progress bar on a
// terminal), running a command until an interrupt, and serving a trained
// model's export with TensorFlow Serving's REST API.
package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"golang.org/x/term"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/serving"
	"github.com/towerflow/towerflow/towers"
)

// Flags are the flags every example has.
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
	fs.StringVar(&f.Serve, "serve", "", "after training, export and serve on this address (needs -model_dir), e.g. localhost:8501")
	fs.IntVar(&f.Towers, "towers", 0, "towers to train with: 0 for one per local device (each GPU, else each core)")
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

// Devices returns the devices of n towers: towers.LocalDevices() for 0;
// else the first n local GPUs in a build that has GPUs, or n CPU devices
// (more than the cores is allowed, and logged when training starts).
func Devices(n int) ([]towers.Device, error) {
	local := towers.LocalDevices()
	switch {
	case n < 0:
		return nil, fmt.Errorf("%d towers, want 0 or more", n)
	case n == 0:
		return local, nil
	case towers.NumGPUs() == 0:
		out := make([]towers.Device, n)
		for i := range out {
			out[i] = towers.CPU(i)
		}
		return out, nil
	case n > len(local):
		return nil, fmt.Errorf("%d towers, but there are %d GPUs", n, len(local))
	}
	return local[:n], nil
}

// Logger returns the examples' logger: text on standard error.
func Logger() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }

// Config returns the examples' Estimator configuration: log to log every
// logEvery steps, or show a progress bar instead when standard error is
// an interactive terminal.
func Config(modelDir string, seed uint64, logEvery int, log *slog.Logger) estimator.RunConfig {
	cfg := estimator.RunConfig{ModelDir: modelDir, Seed: seed, LogEvery: logEvery, Logger: log}
	if term.IsTerminal(int(os.Stderr.Fd())) && os.Getenv("TERM") != "dumb" {
		cfg.Progress = os.Stderr
	}
	return cfg
}

// Main runs an example's command after its flags are parsed: train with a
// context an interrupt cancels, then, with -serve, serve until
// interrupted. Bad flags exit the process with status 2 (see Usage), an
// error with 1, each printed after name on standard error.
func Main(name string, f Flags, train func(ctx context.Context) error, serve Serving) {
	Usage(name, f.Check())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := train(ctx)
	if err == nil && f.Serve != "" {
		serve.ModelDir = f.ModelDir
		err = serve.ListenAndServe(ctx, f.Serve)
	}
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Processes joins the processes mpirun started this one among
// (collective.Join) and returns their group, or nil when it runs alone,
// with the function that leaves it. An example that cannot run under
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

// Serving is what an example serves: the newest export of its model
// directory, as model Name.
type Serving struct {
	// Name is the model's name in the URLs (/v1/models/Name:predict).
	Name string
	// ModelDir is the model directory: its latest checkpoint is exported
	// to ModelDir/export (Main sets it from -model_dir).
	ModelDir string
	// Model returns a new model of the example, for the export and the
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
	srv, dir, err := s.Server(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()
	go srv.Watch(ctx, 10*time.Second)
	if s.Logger != nil {
		s.Logger.Info("serving", "export", dir, "addr", addr, "try", fmt.Sprintf(s.Try, addr))
	}
	return serving.ListenAndServe(ctx, addr, srv)
}
