package replicate

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/parallel"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/towers"
)

// LossReduction says how tower losses, and so gradients, combine.
type LossReduction int

const (
	// BatchMean, the default, weights each tower's loss by its share of the
	// batch's rows. For a loss that is a mean over the shard's examples, N
	// towers then train exactly like one device, whatever the split and
	// whatever the machine: what PyTorch DDP and Horovod do.
	BatchMean LossReduction = iota
	// Sum adds the tower losses: right for a loss that sums over examples,
	// and the default of TensorFlow's replicate_model_fn. With a mean loss
	// the effective learning rate grows with the number of towers.
	Sum
	// Mean divides each tower's loss by the number of towers (TensorFlow's
	// MEAN). Under Sum and Mean a step depends on its number of towers: a
	// batch with fewer rows than devices runs on as many towers as rows.
	Mean
	// None is not a reduction: asking for it is an error, as in TensorFlow.
	None
)

// String returns the reduction's name.
func (r LossReduction) String() string {
	switch r {
	case Sum:
		return "SUM"
	case Mean:
		return "MEAN"
	case BatchMean:
		return "BATCH_MEAN"
	case None:
		return "NONE"
	}
	return fmt.Sprintf("LossReduction(%d)", int(r))
}

// Config says how a model function is replicated. Its zero value is one
// tower per local device (towers.LocalDevices), the batch-weighted mean of
// the tower losses, variables on the parameter server, and no optimizer
// (the model function's Spec then names its own in TrainOps).
type Config struct {
	// Devices has one entry per tower; nil means towers.LocalDevices().
	// towers.ParseDevices makes them from TensorFlow-style names. A GPU
	// device is an error (towerflow has no GPU backend); more CPU towers
	// than cores are allowed (useful in tests) and logged.
	Devices []towers.Device
	// Reduction combines tower losses and gradients; default BatchMean.
	Reduction LossReduction
	// Placement places the model's variables, counting only the variables
	// model code creates (towers.RoundRobin(devices...) spreads them); nil
	// keeps them on the parameter server, CPU:0. The global step and
	// optimizer slots stay with the variable they belong to or on the
	// parameter server.
	Placement towers.Placement
	// Optimizer minimises the Spec's loss over every trainable variable
	// when the model function returns no train ops.
	Optimizer optimizers.Optimizer
	// OptimizerFn, when set instead of Optimizer, makes that optimizer from
	// the params.
	OptimizerFn func(model.Params) (optimizers.Optimizer, error)
	// ReduceGradients, when set, sees the tower-summed gradients of each
	// train op before its optimizer runs (the place to all-reduce them
	// across processes). With Processes it sees them already summed over
	// every process.
	ReduceGradients GradientReducer

	// Processes, a group of more than one rank (collective.Join under
	// mpirun), trains across processes: every process runs its own towers
	// on its own part of the data, and after each step's towers the
	// processes sum their tower-summed gradients and state updates in one
	// fused all-reduce, so the optimizer runs once per process with the
	// same result everywhere (loss weights span every process: N
	// processes × M towers train like one device on the combined batch).
	// Averaging replaces that with weight averaging. Every process must
	// call the Engine's collective methods in the same order; the
	// estimator does. Every process must also build what rank 0 builds —
	// the same variables (names, order, shapes, dtypes, trainability),
	// train ops (optimizer Config, learning rates at sampled steps, the
	// variables trained and which of them have sparse gradients, clipping),
	// state updates, eval metrics, Reduction, Averaging, BucketBytes and
	// SparseAsDense; only the rows and the towers may differ:
	// at the start of a run and at every step or evaluation that follows a
	// new build, the processes compare a hash of their builds, and a
	// difference stops every one with a ModelMismatchError naming the
	// first thing that differs.
	Processes collective.Comm
	// Averaging, when Every > 0, trains each process on its own and
	// averages the weights every Every steps instead of all-reducing
	// gradients every step.
	Averaging Averaging
	// BucketBytes caps the buffer of the fused all-reduce: gradients are
	// packed into buckets of at most this many bytes, one all-reduce per
	// bucket (Horovod's tensor fusion, DDP's buckets); 0 means
	// collective.DefaultBucketBytes, 64 MiB.
	BucketBytes int
	// SparseAsDense says how sparse gradients (an embedding table's: the
	// ids and rows a batch touched) cross processes: gathered, every
	// process receiving every process's ids and rows, or densified and
	// all-reduced as dense gradients are (Horovod's sparse_as_dense). The
	// default, SparseAsDenseAuto, takes whichever moves fewer bytes,
	// gradient by gradient and step by step; either way the sum names the
	// same rows with the same values, up to float rounding. Every process
	// must have the same setting.
	SparseAsDense SparseAsDense
	// PeerTimeout bounds how long a process waits for the others in one
	// phase of collectives (a training step's header and all-reduce, the
	// start's sync of variables, a weight average, the sum of metrics):
	// when a process stops (SIGSTOP, a hang) or its network goes silent,
	// every live process stops after it with a PeerError whose Timeout is
	// set, instead of waiting for ever. 0 means DefaultPeerTimeout; a
	// negative value means no bound. A timed-out collective cannot be
	// taken back: the group is broken and the processes should exit.
	PeerTimeout time.Duration
	// Clip clips the gradients of the train op Optimizer makes for a Spec
	// without train ops (a Spec's own train ops set model.TrainOp.Clip):
	// once per update, after the towers' sum and the cross-process
	// all-reduce. The zero value clips nothing.
	Clip model.Clip
	// AccumulateSteps, when more than 1, makes each training update of
	// the estimator's Train the sum of that many micro-batches, read one
	// after another from the input (Engine.TrainMicroBatches): equal to
	// one step on the micro-batches together, the global step counting
	// updates. 0 and 1 mean one batch per update.
	AccumulateSteps int
	// Precision is the arithmetic of the towers' convolutions and matrix
	// products (package layers' Conv2D and Dense, their gradients): the
	// default, towers.FullPrecision, computes them in their dtype;
	// towers.BFloat16 computes float32 ones in bfloat16 with float32 sums
	// and results (mixed precision), in every mode, while variables,
	// gradients, optimizer updates and slots, batch-norm statistics and
	// losses stay float32. Where this CPU or build cannot run an op kind
	// in bfloat16 (layers.BF16Support: convolutions need oneDNN, -tags
	// dnnl, and AVX512_BF16; matrix products OpenBLAS's cblas_sbgemm or
	// else oneDNN, and AVX512_BF16), those ops run in float32, and the
	// engine's logger says so once, with the reason, when it builds them.
	Precision towers.Precision
}

// DefaultPeerTimeout is Config.PeerTimeout's default: 10 minutes.
const DefaultPeerTimeout = 10 * time.Minute

// peerTimeout is the bound PeerTimeout asks for; 0: none.
func (c Config) peerTimeout() time.Duration {
	switch {
	case c.PeerTimeout == 0:
		return DefaultPeerTimeout
	case c.PeerTimeout < 0:
		return 0
	}
	return c.PeerTimeout
}

// Averaging is weight averaging between processes, PyTorch's
// PeriodicModelAverager: each process takes Every local steps with its own
// optimizer, then every process's model variables are replaced by their
// mean over the processes. Every = 1 with plain SGD on equal shards equals
// synchronous training (the mean of one step from the same weights is one
// step on the mean gradient); a larger Every trades that for fewer
// all-reduces. Embedding tables are averaged as any variable, whole: each
// average all-reduces every table in full (about twice its bytes through
// each process, its slots' too with Slots), however few rows the steps
// since the last one touched, where synchronous training moves only the
// touched rows (see SparseAsDense); for large tables choose a larger
// Every, or synchronous training.
type Averaging struct {
	// Every is the number of local steps between averages; 0 turns
	// averaging off.
	Every int64
	// Slots averages the optimizer slots too (momentum, Adam's moments),
	// as post-local SGD may; by default each process keeps its own.
	Slots bool
}

// Model is a model function with its replication: what an Estimator runs.
type Model struct {
	fn  model.Fn
	cfg Config
}

// ModelFn returns fn replicated as cfg says: one tower per device. An
// invalid configuration is reported when an engine is made from it (see
// Model.Validate).
func ModelFn(fn model.Fn, cfg Config) *Model {
	if cfg.Devices == nil {
		cfg.Devices = towers.LocalDevices()
	} else {
		cfg.Devices = slices.Clone(cfg.Devices)
	}
	return &Model{fn: fn, cfg: cfg}
}

// Fn returns the wrapped model function.
func (m *Model) Fn() model.Fn { return m.fn }

// Validate reports what makes the model unusable: no model function, an
// unknown reduction or NONE, no devices, a device listed twice, a device
// this build cannot run.
func (m *Model) Validate() error {
	if m == nil || m.fn == nil {
		return fmt.Errorf("replicate: nil model function")
	}
	switch m.cfg.Reduction {
	case Sum, Mean, BatchMean:
	case None:
		return fmt.Errorf("replicate: loss reduction NONE cannot combine tower losses; use BATCH_MEAN, SUM or MEAN")
	default:
		return fmt.Errorf("replicate: unknown loss reduction %v", m.cfg.Reduction)
	}
	if m.cfg.Optimizer != nil && m.cfg.OptimizerFn != nil {
		return fmt.Errorf("replicate: both Optimizer and OptimizerFn are set; set one")
	}
	if err := m.cfg.Clip.Validate(); err != nil {
		return fmt.Errorf("replicate: Config.Clip: %w", err)
	}
	if p := m.cfg.Precision; p != towers.FullPrecision && p != towers.BFloat16 {
		return fmt.Errorf("replicate: Config.Precision %v: want towers.FullPrecision or towers.BFloat16", p)
	}
	if m.cfg.AccumulateSteps < 0 {
		return fmt.Errorf("replicate: Config.AccumulateSteps %d: want 0 or more (0 and 1: one batch per update)", m.cfg.AccumulateSteps)
	}
	return checkDevices(m.cfg.Devices)
}

// checkDevices checks that devices can each run a tower in this build.
func checkDevices(devices []towers.Device) error {
	if len(devices) == 0 {
		return fmt.Errorf("replicate: no devices")
	}
	seen := map[towers.Device]bool{}
	gpus := towers.NumGPUs()
	for _, d := range devices {
		if seen[d] {
			return fmt.Errorf("replicate: device %v listed twice", d)
		}
		seen[d] = true
		if d.Index < 0 {
			return fmt.Errorf("replicate: device %v has a negative index", d)
		}
		if d.Kind == towers.GPUKind {
			if gpus == 0 {
				return fmt.Errorf("replicate: device %v: this build has no GPU backend, so it cannot run a GPU tower (use CPU devices, or the default towers.LocalDevices())", d)
			}
			if d.Index >= gpus {
				return fmt.Errorf("replicate: device %v: the GPU backend sees %d GPUs", d, gpus)
			}
		}
	}
	return nil
}

// logOversubscribed says, once per engine, that more CPU towers than cores
// run: allowed, but they only add splitting and summing.
func logOversubscribed(log *slog.Logger, devices []towers.Device) {
	cpus := 0
	for _, d := range devices {
		if d.Kind == towers.CPUKind {
			cpus++
		}
	}
	if cores := parallel.Cores(); cpus > cores {
		log.Info("replicate: more CPU towers than cores; towers will share cores", "cpu_towers", cpus, "cores", cores)
	}
}

// parameterServer is where variables live unless placed otherwise: CPU:0,
// a local parameter server (a lone GPU device would hold them, were there a
// GPU backend; check rejects GPU devices).
func parameterServer(devices []towers.Device) towers.Device {
	var gpus []towers.Device
	for _, d := range devices {
		if d.Kind == towers.GPUKind {
			gpus = append(gpus, d)
		}
	}
	if len(gpus) == 1 {
		return gpus[0]
	}
	return towers.CPU(0)
}

// optimizer returns the optimizer for specs without train ops, nil when
// none was configured.
func (c Config) optimizer(params model.Params) (optimizers.Optimizer, error) {
	if c.OptimizerFn == nil {
		return c.Optimizer, nil
	}
	opt, err := c.OptimizerFn(params)
	if err != nil {
		return nil, fmt.Errorf("make optimizer: %w", err)
	}
	if opt == nil {
		return nil, fmt.Errorf("make optimizer: got nil")
	}
	return opt, nil
}
