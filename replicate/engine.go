package replicate

import (
	"fmt"
	"log/slog"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/towers"
)

// EngineConfig configures NewEngine; its zero value works.
type EngineConfig struct {
	// Seed seeds variable initializers: the same seed gives the same
	// initial variables on any number of towers.
	Seed uint64
	// Params are handed to every model function call.
	Params model.Params
	// Logger receives the engine's messages; nil means none.
	Logger *slog.Logger
}

// Engine runs a Model: one tower per device over one variable store, which
// it owns. It builds the towers of a mode once per input signature and
// reuses them: a step only splits the batch, feeds the shards and runs the
// towers. An Engine is not safe for concurrent use; the Estimator runs one
// step at a time.
type Engine struct {
	fn         model.Fn
	cfg        Config
	store      *towers.Store
	params     model.Params
	log        *slog.Logger
	defaultOpt optimizers.Optimizer
	globalStep *towers.Variable
	builds     map[string]*build
	splits     splitCache // how recent batches were split, to split them once
	last       *build     // the towers of the latest train step, for fetches
	// pending is the build whose state updates a computed step has
	// combined and the next applied one writes (see computeStep).
	pending *build
	// lastPredict is the towers of the latest predict step.
	lastPredict *build
	uses        int64 // steps prepared so far
	// onBuild runs after a new build has created its variables.
	onBuild func() error
	// built is the newest build, for onBuild (see Built).
	built *build
	// metrics holds each tower's eval metric states by name; it outlives
	// builds, since one evaluation may run several input signatures.
	metrics []map[string]metrics.Metric
	// fallbacks holds the reasons for ops running in float32 under
	// Config.Precision BFloat16 that the engine has logged.
	fallbacks map[string]bool
	// x trains across processes; nil for one.
	x *across
	// gradNorm is the last update's global gradient norm before clipping,
	// when hasGradNorm (see GradientNorm).
	gradNorm    float64
	hasGradNorm bool
}

// build is the towers of one mode and input signature.
type build struct {
	used    int64 // when it last ran, for eviction
	mode    model.Mode
	towers  []*tower.Tower
	specs   []*model.Spec
	rows    []int
	weights []float64
	plans   []*trainPlan
	updates []*updatePlan
	// arena holds the plans' sums and the float updates' values in one
	// slice per type; scaled is the weights times the process's share,
	// reused every step.
	arena  arena
	scaled []float64
	// desc describes a Train or Eval build across processes (ranks.go).
	desc *description
}

// NewEngine returns an engine for m with a new variable store holding the
// global step. An invalid model (see Model.Validate) is an error.
func NewEngine(m *Model, cfg EngineConfig) (*Engine, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	logOversubscribed(log, m.cfg.Devices)
	store := towers.NewStore(towers.StoreConfig{Seed: cfg.Seed, Placement: m.cfg.Placement, ParameterServer: parameterServer(m.cfg.Devices)})
	gs, _, err := store.GetOrCreate(towers.VarSpec{Name: model.GlobalStepName, Dtype: tensor.Int64})
	if err != nil {
		return nil, fmt.Errorf("replicate: global step: %w", err)
	}
	return &Engine{fn: m.fn, cfg: m.cfg, store: store, params: cfg.Params, log: log, globalStep: gs, builds: map[string]*build{}, x: newAcross(m.cfg)}, nil
}

// Store returns the variable store: master values by name, weights by name
// and as one flat vector.
func (e *Engine) Store() *towers.Store { return e.store }

// Step returns the global step: the number of training steps taken.
func (e *Engine) Step() int64 { return e.globalStep.Data().([]int64)[0] }

// OnBuild sets a function that runs after each new build of towers has
// created its variables (nil: none), e.g. to warm-start them: a hook for
// the run loop that owns the engine (the estimator's), like PredictSpec and
// StepHooks; model code never needs it. An error
// fails the step; the towers are built again, and fn called again, the next
// time.
func (e *Engine) OnBuild(fn func() error) { e.onBuild = fn }

// Close releases every build's towers.
func (e *Engine) Close() error {
	var errs []error
	for _, b := range e.builds {
		for _, t := range b.towers {
			if err := t.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	e.builds, e.last, e.lastPredict, e.pending = map[string]*build{}, nil, nil, nil
	if len(errs) > 0 {
		return fmt.Errorf("close towers: %v", errs)
	}
	return nil
}
