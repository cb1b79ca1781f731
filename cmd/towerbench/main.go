// Command towerbench measures training speed: towerflow with 1..N towers
// against a hand-written single-graph gorgonia loop of the same model.
//
//	go run ./cmd/towerbench -model mlp -towers 1,2
//	go run -tags openblas ./cmd/towerbench -model cnn   # OpenBLAS, see towers/blas_openblas.go
//	go run -tags openblas ./cmd/towerbench -towers 1 -blas-threads 2
//	go run -tags openblas,dnnl ./cmd/towerbench -model resnet20   # convolutions in oneDNN, see internal/dnnl
//	go run -tags openblas,dnnl ./cmd/towerbench -model resnet20 -precision bf16   # bfloat16 mixed precision
//
// Models (float32, synthetic data from a seeded generator, SGD on the mean
// squared error against random targets), written with towerflow's layers
// package (-ops layers, the default) or with gorgonia's own ops (-ops
// gorgonia), the same for both implementations:
//
//	mlp  batch 512: 256 → 512 ReLU → 10
//	cnn  batch 128, NCHW 3×32×32: conv 3×3×16 + ReLU + max-pool 2 →
//	     conv 3×3×32 + ReLU + max-pool 2 → dense 10
//
// and two of the examples' classifiers, on random class ids, with softmax
// cross-entropy and SGD with momentum 0.9, on towerflow only:
//
//	resnet20  batch 128: examples/cifar10's ResNet-20 (batch norm
//	          synchronized over the towers, weight decay 1e-4)
//	mnist     batch 50: examples/mnist's MLP, 784 → 128 ReLU → 10
//
// and a click-through-rate model over embedding tables, on towerflow only:
//
//	embed  batch 2048: 13 dense features → 64 ReLU → 16; 26 categorical
//	       features, each a bag of 1–3 ids from a power law into its own
//	       table of -rows × 16 (default 100000), summed
//	       (layers.EmbeddingLookupSparse over sharding.SparseCOO
//	       features); the 432 concatenated → 256 ReLU → 128 ReLU → 1
//	       logit; sigmoid cross-entropy; Adagrad at 0.01 (-optimizer sgd:
//	       SGD)
//
// resnet20 computes in -format's order (layers.Format): by default the one
// the build computes fastest, NHWC where oneDNN computes the convolutions
// (-tags dnnl) and NCHW otherwise; the images arrive in NCHW either way.
//
// -precision bf16 trains towerflow's runs with bfloat16 mixed precision
// (replicate.Config.Precision: convolutions in oneDNN's bfloat16
// primitives, matrix products in cblas_sbgemm or oneDNN, float32
// everything else); stderr says which of them run in bfloat16 and why not,
// and the engine's warning names what falls back to float32. The gorgonia
// loop stays float32.
//
// -alternate share turns a setting (layers.ShareConvolutions: a tower
// waiting at a rendezvous helps with the late tower's convolution) off and
// on at every other step of towerflow's runs, and prints after each run's
// line
//
//	model=<m> impl=towerflow towers=<n> alternate=share on_ms_p50=<a> off_ms_p50=<b> off/on_p50=<r> pairs=<k>
//
// the median step each way and the median over every two neighbouring
// steps of off over on: neighbouring steps share the host's slow drifts,
// so the pairs resolve changes of about a percent that whole runs on a
// noisy machine do not (docs/performance.md, Method). The run's own line
// is then of steps with the setting on and off alike.
//
// For every towers count and implementation it trains -warmup steps, then
// -steps timed steps, and prints one line
//
//	model=<m> impl=<impl> towers=<n> samples_per_sec=<x> step_ms_p50=<y>
//
// where samples_per_sec is batch×steps over the timed steps' wall time and
// step_ms_p50 the median step time. impl=towerflow trains through
// replicate.ModelFn, estimator.New and Estimator.Train, timing steps with an
// estimator.OnStep hook; impl=gorgonia (towers=1 only) is one graph, a tape
// machine and a vanilla SGD solver. The last lines are the ratios
// "ratio towerflow/gorgonia towers=1: <r>" and "ratio towers=<N>/towers=1: <r>"
// (towerflow) for each N > 1.
//
// bench/torch_mlp.py, bench/torch_cnn.py, bench/torch_resnet.py,
// bench/torch_mnist.py and bench/torch_embed.py print the same line for
// PyTorch.
//
// Started by mpirun (built with -tags mpi), the processes train together
// (replicate.Config.Processes): -batch is the batch of all of them, each
// trains its part on its -towers towers, and rank 0 prints the lines, with
// processes=<n> after towers=<n>:
//
//	go build -tags mpi,openblas -o /tmp/towerbench ./cmd/towerbench
//	mpirun -np 2 /tmp/towerbench -model mlp -impl towerflow -towers 1
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/towers"
)

type config struct {
	model         string
	batch         int
	steps, warmup int
	towers        []int
	impls         []string
	ops           string
	blasThreads   int
	seed          uint64
	// rows is each embedding table's row count (model embed; 0: 100000).
	rows int
	// optimizer is model embed's optimizer: adagrad ("" too) or sgd.
	optimizer string
	// procs is the group of processes mpirun started this one in; nil
	// alone. The batch is then all of theirs, each training its part.
	procs collective.Comm
	// precision is towerflow's replicate.Config.Precision (-precision).
	precision towers.Precision
	// format is the order of resnet20's activations (-format).
	format layers.Format
	// log receives the engines' warnings (nil: none).
	log *slog.Logger
	// alternate names the setting towerflow's runs turn off and on at
	// every other step (-alternate); "" none.
	alternate string
}

func main() {
	var cfg config
	var towersFlag, implFlag string
	flag.StringVar(&cfg.model, "model", "mlp", "model: mlp, cnn, resnet20, mnist or embed")
	flag.IntVar(&cfg.batch, "batch", 0, "batch size (default 512 for mlp, 128 for cnn and resnet20, 50 for mnist, 2048 for embed)")
	flag.IntVar(&cfg.steps, "steps", 50, "timed training steps per run")
	flag.IntVar(&cfg.warmup, "warmup", 5, "untimed training steps before the timed ones")
	flag.StringVar(&towersFlag, "towers", "1,2", "comma-separated tower counts")
	flag.StringVar(&implFlag, "impl", "towerflow,gorgonia", "comma-separated implementations: towerflow, gorgonia")
	flag.StringVar(&cfg.ops, "ops", "layers", "what the models are written with: layers (towerflow's layers package) or gorgonia (gorgonia's own ops)")
	flag.IntVar(&cfg.blasThreads, "blas-threads", 0, "threads one BLAS call may use (OpenBLAS only, -tags openblas; 0 leaves the default, 1)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the data and the initial variables")
	flag.IntVar(&cfg.rows, "rows", 0, "rows of each embedding table (model embed; default 100000)")
	flag.StringVar(&cfg.optimizer, "optimizer", "", "optimizer of model embed: adagrad (the default) or sgd")
	precisionFlag := flag.String("precision", "float32", "arithmetic of towerflow's convolutions and matrix products: float32 or bf16 (bfloat16 mixed precision, replicate.Config.Precision)")
	formatFlag := flag.String("format", "auto", "order of resnet20's activations: nchw, nhwc, or auto (layers.PreferredFormat: nhwc where oneDNN computes the convolutions)")
	ownConv := flag.Bool("own-conv", false, "compute convolutions with layers' own code, also in a build with oneDNN (-tags dnnl)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the runs to this file (go tool pprof)")
	traceFile := flag.String("trace", "", "write a runtime execution trace of the runs to this file (go tool trace)")
	flag.StringVar(&cfg.alternate, "alternate", "", "turn a setting off and on at every other step of towerflow's runs and print the steps' medians each way: share (layers.ShareConvolutions)")
	flag.Parse()
	var err error
	if cfg.towers, err = parseInts(towersFlag); err != nil {
		fmt.Fprintln(os.Stderr, "towerbench: -towers:", err)
		os.Exit(2)
	}
	cfg.impls = strings.Split(implFlag, ",")
	if err := checkAlternation(cfg.alternate); err != nil {
		fmt.Fprintln(os.Stderr, "towerbench: -alternate:", err)
		os.Exit(2)
	}
	if cfg.precision, err = towers.ParsePrecision(*precisionFlag); err != nil {
		fmt.Fprintln(os.Stderr, "towerbench: -precision:", err)
		os.Exit(2)
	}
	if cfg.precision == towers.BFloat16 { // what falls back to float32
		cfg.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cfg.blasThreads > 0 {
		if err := towers.SetBLASThreads(cfg.blasThreads); err != nil {
			fmt.Fprintln(os.Stderr, "towerbench: -blas-threads:", err)
			os.Exit(2)
		}
	}
	if *ownConv {
		if err := layers.UseOneDNN(false); err != nil {
			fmt.Fprintln(os.Stderr, "towerbench: -own-conv:", err)
			os.Exit(2)
		}
	}
	if cfg.format, err = layers.ParseFormat(*formatFlag); err != nil {
		fmt.Fprintln(os.Stderr, "towerbench: -format:", err)
		os.Exit(2)
	}
	blas, threads := towers.BLAS()
	fmt.Fprintf(os.Stderr, "towerbench: BLAS %s (%d threads a call), convolutions %s, GOMAXPROCS %d, ops %s, precision %v, resnet20 in %v\n", blas, threads, layers.ConvBackend(), runtime.GOMAXPROCS(0), cfg.ops, cfg.precision, cfg.format)
	if cfg.precision == towers.BFloat16 {
		conv, matmul, whyConv, whyMatmul := layers.BF16Support()
		fmt.Fprintf(os.Stderr, "towerbench: bfloat16 convolutions %t, matrix products %t\n", conv, matmul)
		for _, why := range []string{whyConv, whyMatmul} {
			if why != "" {
				fmt.Fprintln(os.Stderr, "towerbench: float32:", why)
			}
		}
	}
	stopProfile, err := record(*cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "towerbench: -cpuprofile:", err)
		os.Exit(1)
	}
	stopTrace, err := record(*traceFile, trace.Start, trace.Stop)
	if err != nil {
		fmt.Fprintln(os.Stderr, "towerbench: -trace:", err)
		os.Exit(1)
	}
	comm, err := collective.Join()
	if err != nil {
		fmt.Fprintln(os.Stderr, "towerbench:", err)
		os.Exit(2)
	}
	defer comm.Close()
	out := io.Writer(os.Stdout)
	if comm.Size() > 1 {
		cfg.procs = comm
		if comm.Rank() != 0 {
			out = io.Discard // rank 0 reports for every process
		}
	}
	before, probed := coreRoundTrip(coreProbes)
	err = run(ctx, cfg, out)
	stopTrace()
	stopProfile()
	if after, _ := coreRoundTrip(coreProbes); probed {
		fmt.Fprintf(os.Stderr, "towerbench: a round trip between two cores took %d ns before the runs and %d ns after (on an otherwise idle VM, hundreds of ns mean the host put its cores far apart, which slows every exchange between towers: docs/performance.md)\n", before.Nanoseconds(), after.Nanoseconds())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "towerbench:", err)
		os.Exit(1)
	}
}

// coreProbes is how many round trips coreRoundTrip times.
const coreProbes = 100000

// record creates the file at path and starts writing to it with start (a
// CPU profile, an execution trace); the returned func stops and closes it.
// An empty path records nothing.
func record(path string, start func(io.Writer) error, stop func()) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		stop()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "towerbench:", err)
		}
	}, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// result is one run's figures.
type result struct {
	impl          string
	towers        int
	samplesPerSec float64
	stepMSP50     float64
	alternation   string // -alternate's summary, if any
}

// run runs every implementation at every towers count and writes one line
// per run, then the ratios.
func run(ctx context.Context, cfg config, w io.Writer) error {
	m, ok := models[cfg.model]
	if !ok {
		return fmt.Errorf("unknown model %q (want mlp, cnn, resnet20, mnist or embed)", cfg.model)
	}
	if cfg.ops == "" {
		cfg.ops = "layers"
	}
	k, ok := kits[cfg.ops]
	if !ok {
		return fmt.Errorf("unknown -ops %q (want layers or gorgonia)", cfg.ops)
	}
	if m.custom == nil && (cfg.rows != 0 || cfg.optimizer != "") {
		return fmt.Errorf("-rows and -optimizer are model embed's, not %s's", m.name)
	}
	if cfg.batch == 0 {
		cfg.batch = m.defaultBatch
	}
	if cfg.steps < 1 || cfg.warmup < 0 {
		return fmt.Errorf("need -steps ≥ 1 and -warmup ≥ 0")
	}
	var results []result
	for _, n := range cfg.towers {
		for _, impl := range cfg.impls {
			if impl == "gorgonia" && (n != 1 || m.towerflowOnly()) {
				continue // one graph is one tower; the examples' models are towerflow's
			}
			r, err := measure(ctx, impl, m, k, cfg, n)
			if err != nil {
				return fmt.Errorf("model %s impl %s towers %d: %w", m.name, impl, n, err)
			}
			results = append(results, r)
			procs := ""
			if cfg.procs != nil {
				procs = fmt.Sprintf(" processes=%d", cfg.procs.Size())
			}
			fmt.Fprintf(w, "model=%s impl=%s towers=%d%s samples_per_sec=%.1f step_ms_p50=%.3f\n",
				m.name, r.impl, r.towers, procs, r.samplesPerSec, r.stepMSP50)
			if r.alternation != "" {
				fmt.Fprintf(w, "model=%s impl=%s towers=%d%s %s\n", m.name, r.impl, r.towers, procs, r.alternation)
			}
		}
	}
	find := func(impl string, n int) (result, bool) {
		i := slices.IndexFunc(results, func(r result) bool { return r.impl == impl && r.towers == n })
		if i < 0 {
			return result{}, false
		}
		return results[i], true
	}
	tf1, ok1 := find("towerflow", 1)
	if g1, ok := find("gorgonia", 1); ok && ok1 {
		fmt.Fprintf(w, "ratio towerflow/gorgonia towers=1: %.3f\n", tf1.samplesPerSec/g1.samplesPerSec)
	}
	if ok1 {
		for _, n := range cfg.towers {
			if r, ok := find("towerflow", n); ok && n > 1 {
				fmt.Fprintf(w, "ratio towers=%d/towers=1: %.3f\n", n, r.samplesPerSec/tf1.samplesPerSec)
			}
		}
	}
	return nil
}

// measure trains warmup+steps steps in one run and times the last steps
// from the time stamps taken after every step.
func measure(ctx context.Context, impl string, m benchModel, k kit, cfg config, nTowers int) (result, error) {
	tr, err := newTrainerConfig(impl, m, k, cfg, nTowers)
	if err != nil {
		return result{}, err
	}
	defer tr.close()
	var alt *alternation
	if impl == "towerflow" {
		if alt, err = newAlternation(cfg.alternate); err != nil {
			return result{}, fmt.Errorf("-alternate: %w", err)
		}
	}
	if alt != nil {
		defer alt.restore()
	}
	stamps := make([]time.Time, 0, cfg.warmup+cfg.steps+1)
	stamps = append(stamps, time.Now())
	if err := tr.train(ctx, cfg.warmup+cfg.steps, func() {
		stamps = append(stamps, time.Now())
		if alt != nil {
			alt.step(stamps[len(stamps)-1].Sub(stamps[len(stamps)-2]), len(stamps) > cfg.warmup+1)
		}
	}); err != nil {
		return result{}, err
	}
	if len(stamps) != cfg.warmup+cfg.steps+1 {
		return result{}, fmt.Errorf("trained %d steps, want %d", len(stamps)-1, cfg.warmup+cfg.steps)
	}
	timed := stamps[cfg.warmup:]
	steps := make([]time.Duration, len(timed)-1)
	for i := range steps {
		steps[i] = timed[i+1].Sub(timed[i])
	}
	total := timed[len(timed)-1].Sub(timed[0])
	r := result{
		impl:          impl,
		towers:        nTowers,
		samplesPerSec: float64(cfg.batch*cfg.steps) / total.Seconds(),
		stepMSP50:     float64(median(steps)) / float64(time.Millisecond),
	}
	if alt != nil {
		r.alternation = alt.summary()
	}
	return r, nil
}

// median returns the median of xs (of an even count, the mean of the two
// in the middle).
func median[T time.Duration | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
