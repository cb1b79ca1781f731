// Package optimizers holds the optimizers the replication engine applies, once per
// training step, to the master variables of a towers.Store.
//
// An Optimizer is an immutable description (kind and hyper-parameters); it
// keeps no state of its own. Every piece of state an optimizer needs between
// steps lives in named slot variables of the store, so a checkpoint of the
// store captures it and a restored store resumes training exactly:
//
//	<var>/<Name>/momentum   Momentum's accumulator of variable <var>
//	<var>/<Name>/m          Adam's first moment of variable <var>
//	<var>/<Name>/v          Adam's second moment of variable <var>
//	<Name>/iterations       Adam's step count t, a scalar int64
//	<var>/<Name>/rms        RMSProp's mean square of variable <var>
//	<var>/<Name>/accumulator Adagrad's and FTRL's sum of squares of variable <var>
//	<var>/<Name>/linear      FTRL's linear term of variable <var>
//
// where <Name> is the optimizer's name ("SGD", "Momentum", "Adam",
// "RMSProp", "Adagrad" or "Ftrl" unless changed with Named). Slot variables
// are non-trainable, have their variable's dtype and shape and are placed
// on its device; they start at zero, except Adagrad's and FTRL's
// accumulators, which start at the initial accumulator value.
//
// The learning rate is constant, or follows a Schedule
// (LearningRateSchedule) of the store's global step, so that a restored
// store resumes on the same rate too. WeightDecay adds decoupled weight
// decay to any kind but FTRL. Slot values that come out of an update
// subnormal are flushed to zero.
//
// A gradient is dense (a slice of the variable's size) or sparse: a
// towers.IndexedSlices, the rows of a large table a batch touched (an
// embedding's gradient), its duplicate ids summed before the update. SGD,
// Adagrad and FTRL update a sparse gradient's rows alone, each exactly as
// the dense apply of the densified gradient updates it, and leave every
// other row and its slots as they are, so a step costs the rows, not the
// table. Momentum, Adam and RMSProp decay every row's slots in their dense
// form; a sparse gradient gives them by default exactly what its densified
// gradient gives (TensorFlow 1's semantics), walking the table without a
// dense gradient buffer, and with the Lazy option only its rows and their
// slots change (TensorFlow's LazyAdam, PyTorch's SparseAdam). The learning
// rate, its schedule, weight decay (on the weights updated) and the
// subnormal flush apply to rows as to whole variables.
//
// The updates follow TensorFlow's optimizers (Keras's for RMSProp and
// Adagrad), and the tests check them against gorgonia's solvers
// (VanillaSolver, Momentum, AdamSolver, and RMSPropSolver and AdaGradSolver
// with epsilon 0, where their rules match), whose state lives in unexported
// fields that cannot be checkpointed. Arithmetic runs in the variable's own
// dtype: float32 math for float32 variables, float64 math for float64
// variables.
package optimizers

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/parallel"
	"github.com/towerflow/towerflow/towers"
)

// Optimizer updates master variables from their gradients, one step per
// Apply call, keeping its state in slot variables of the store.
type Optimizer interface {
	// Name is the optimizer's name, used as the slot prefix: "SGD",
	// "Momentum", "Adam", "RMSProp", "Adagrad", "Ftrl" by default,
	// changeable with Named.
	Name() string
	// Config describes kind and hyper-parameters, e.g.
	// "Adam(name=Adam,lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08)"; two
	// optimizers with equal Config behave identically (used to check that
	// every tower made the same train-op calls). A learning-rate schedule,
	// weight decay and Lazy, when set, are part of it. Across processes
	// (replicate.Config.Processes) every process's Config, and its
	// LearningRate at a few fixed steps (0, 1, 10, … 10⁶: a schedule's
	// String may not tell two apart), must be rank 0's.
	Config() string
	// LearningRate is the learning rate of the update applied when the
	// global step is step (the steps taken before it): the constant
	// learning rate, or the schedule's rate.
	LearningRate(step int64) float64
	// Apply updates vars in place from grads (grads[i] is a []float32 or
	// []float64 slice with vars[i]'s dtype and size, or a
	// towers.IndexedSlices of its dtype and shape, a sparse gradient, which
	// Apply deduplicates and applies as the package comment says; a nil
	// grads[i], or a nil slice, means no gradient: that variable and its
	// slots are left untouched, while an IndexedSlices with no rows is a
	// zero gradient: it changes nothing where only rows update, and decays
	// every row's slots where all rows do). Slot
	// variables are got or created in store (non-trainable, colocated with
	// their variable, zero-initialised). One Apply is one step: an iteration
	// counter increments once per Apply.
	//
	// Apply checks every argument before it writes anything, so a returned
	// error leaves every variable and slot value unchanged (slots it needed
	// may have been created, with their initial values). With a
	// learning-rate schedule it reads the store's global step, which must
	// exist; it never changes it.
	Apply(store *towers.Store, vars []*towers.Variable, grads []any) error
}

// ErrConfig is wrapped by the error Apply returns for an optimizer built
// with an invalid hyper-parameter or option.
var ErrConfig = errors.New("invalid optimizer configuration")

// ErrMismatch is wrapped by the errors Apply returns when its arguments do
// not fit together: vars and grads of different lengths, a gradient of the
// wrong type or size, a non-float variable.
var ErrMismatch = errors.New("mismatch")

type kind int

const (
	kindSGD kind = iota
	kindMomentum
	kindAdam
	kindRMSProp
	kindAdagrad
	kindFTRL
)

func (k kind) String() string {
	switch k {
	case kindSGD:
		return "SGD"
	case kindMomentum:
		return "Momentum"
	case kindAdam:
		return "Adam"
	case kindRMSProp:
		return "RMSProp"
	case kindAdagrad:
		return "Adagrad"
	case kindFTRL:
		return "Ftrl"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

type config struct {
	kind     kind
	name     string
	lr       float64
	momentum float64
	nesterov bool
	beta1    float64
	beta2    float64
	rho      float64
	initAcc  float64
	eps      float64
	wd       float64
	sched    Schedule // nil: the constant lr
	lazy     bool
	// FTRL's
	lrPower, l1, l2, shrinkage float64
	errs                       []error
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func build(c config, opts []Option) Optimizer {
	c.name = c.kind.String()
	if !(c.lr >= 0) || math.IsInf(c.lr, 0) {
		c.fail("learning rate %v is not finite and non-negative", c.lr)
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.kind == kindFTRL && c.sched == nil && c.lr == 0 {
		c.fail("FTRL's learning rate must be positive, not 0")
	}
	return &optimizer{c: c}
}

// SGD returns plain gradient descent: w -= lr*g. It has no slots.
func SGD(lr float64, opts ...Option) Optimizer {
	return build(config{kind: kindSGD, lr: lr}, opts)
}

// Momentum returns gradient descent with momentum as TensorFlow's
// MomentumOptimizer: accum = momentum*accum + g; w -= lr*accum, with accum
// in the slot "<var>/<Name>/momentum". UseNesterov switches to Nesterov
// momentum. momentum must be finite and non-negative.
func Momentum(lr, momentum float64, opts ...Option) Optimizer {
	c := config{kind: kindMomentum, lr: lr, momentum: momentum}
	if !(momentum >= 0) || math.IsInf(momentum, 0) {
		c.fail("momentum %v is not finite and non-negative", momentum)
	}
	return build(c, opts)
}

// Adam returns the Adam optimizer of Kingma & Ba's Algorithm 1, as
// gorgonia's AdamSolver applies it. With t the step count from 1:
//
//	m = beta1*m + (1-beta1)*g
//	v = beta2*v + (1-beta2)*g*g
//	mhat = m/(1-beta1^t); vhat = v/(1-beta2^t)
//	w -= lr*mhat/(sqrt(vhat)+eps)
//
// Defaults are beta1 0.9, beta2 0.999, eps 1e-8 (options Beta1, Beta2,
// Epsilon). m and v live in the slots "<var>/<Name>/m" and "<var>/<Name>/v",
// t in the scalar int64 slot "<Name>/iterations", shared by all variables.
func Adam(lr float64, opts ...Option) Optimizer {
	return build(config{kind: kindAdam, lr: lr, beta1: 0.9, beta2: 0.999, eps: 1e-8}, opts)
}

// RMSProp returns RMSProp as Keras (TensorFlow 2) applies it, without
// momentum and uncentered:
//
//	ms = rho*ms + (1-rho)*g*g
//	w -= lr*g/(sqrt(ms)+eps)
//
// Defaults are rho 0.9 and eps 1e-7 (options Rho, Epsilon). ms lives in the
// slot "<var>/<Name>/rms", starting at zero. (TensorFlow 1's
// RMSPropOptimizer starts ms at 1 and puts eps inside the square root.)
func RMSProp(lr float64, opts ...Option) Optimizer {
	return build(config{kind: kindRMSProp, lr: lr, rho: 0.9, eps: 1e-7}, opts)
}

// Adagrad returns Adagrad as Keras (TensorFlow 2) applies it:
//
//	acc += g*g
//	w -= lr*g/(sqrt(acc)+eps)
//
// with acc in the slot "<var>/<Name>/accumulator", starting at the initial
// accumulator value. Defaults are initial accumulator 0.1 and eps 1e-7
// (options InitialAccumulator, Epsilon).
func Adagrad(lr float64, opts ...Option) Optimizer {
	return build(config{kind: kindAdagrad, lr: lr, initAcc: 0.1, eps: 1e-7}, opts)
}

type optimizer struct{ c config }

func (o *optimizer) Name() string { return o.c.name }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func (o *optimizer) Config() string {
	c := &o.c
	var b strings.Builder
	fmt.Fprintf(&b, "%v(name=%s,lr=%s", c.kind, c.name, ftoa(c.lr))
	switch c.kind {
	case kindMomentum:
		fmt.Fprintf(&b, ",momentum=%s,nesterov=%t", ftoa(c.momentum), c.nesterov)
	case kindAdam:
		fmt.Fprintf(&b, ",beta1=%s,beta2=%s,eps=%s", ftoa(c.beta1), ftoa(c.beta2), ftoa(c.eps))
	case kindRMSProp:
		fmt.Fprintf(&b, ",rho=%s,eps=%s", ftoa(c.rho), ftoa(c.eps))
	case kindAdagrad:
		fmt.Fprintf(&b, ",initial_accumulator=%s,eps=%s", ftoa(c.initAcc), ftoa(c.eps))
	case kindFTRL:
		fmt.Fprintf(&b, ",lr_power=%s,initial_accumulator=%s,l1=%s,l2=%s,l2_shrinkage=%s",
			ftoa(c.lrPower), ftoa(c.initAcc), ftoa(c.l1), ftoa(c.l2), ftoa(c.shrinkage))
	}
	if c.lazy {
		b.WriteString(",lazy=true")
	}
	if c.wd != 0 {
		fmt.Fprintf(&b, ",weight_decay=%s", ftoa(c.wd))
	}
	if c.sched != nil {
		fmt.Fprintf(&b, ",schedule=%s", c.sched)
	}
	if err := o.err(); err != nil {
		fmt.Fprintf(&b, ",invalid=%q", err.Error())
	}
	b.WriteString(")")
	return b.String()
}

func (o *optimizer) LearningRate(step int64) float64 {
	if o.c.sched != nil {
		return o.c.sched.Rate(step)
	}
	return o.c.lr
}

func (o *optimizer) err() error {
	if len(o.c.errs) == 0 {
		return nil
	}
	msgs := make([]string, len(o.c.errs))
	for i, e := range o.c.errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w: %s", ErrConfig, strings.Join(msgs, "; "))
}

// maxSlots is the most slots an optimizer keeps per variable (Adam's two).
const maxSlots = 2

// slotNames returns the per-variable slot suffixes of the optimizer's kind.
func (o *optimizer) slotNames() []string {
	switch o.c.kind {
	case kindMomentum:
		return []string{"momentum"}
	case kindAdam:
		return []string{"m", "v"}
	case kindRMSProp:
		return []string{"rms"}
	case kindAdagrad:
		return []string{"accumulator"}
	case kindFTRL:
		return []string{"accumulator", "linear"}
	}
	return nil
}

// slotInit is the initializer of slot k (in slotNames order): the initial
// accumulator value for Adagrad's and FTRL's accumulators, zeros (nil)
// for every other.
func (o *optimizer) slotInit(k int) towers.Initializer {
	if (o.c.kind == kindAdagrad || o.c.kind == kindFTRL) && k == 0 {
		return towers.Constant(o.c.initAcc)
	}
	return nil
}

// slotName is the name of the slot of variable v called slot.
func (o *optimizer) slotName(v, slot string) string { return v + "/" + o.c.name + "/" + slot }

func (o *optimizer) Apply(store *towers.Store, vars []*towers.Variable, grads []any) error {
	if err := o.apply(store, vars, grads); err != nil {
		return fmt.Errorf("optimizer %s: %w", o.c.name, err)
	}
	return nil
}

func (o *optimizer) apply(store *towers.Store, vars []*towers.Variable, grads []any) error {
	if err := o.err(); err != nil {
		return err
	}
	if store == nil {
		return errors.New("nil store")
	}
	if len(vars) != len(grads) {
		return fmt.Errorf("%w: %d variables but %d gradients", ErrMismatch, len(vars), len(grads))
	}
	seen := make(map[string]int, len(vars))
	// sparse[i] is grads[i] deduplicated when it is an IndexedSlices.
	sparse := make([]*towers.IndexedSlices, len(vars))
	for i, v := range vars {
		if v == nil {
			return fmt.Errorf("variable %d is nil", i)
		}
		if j, ok := seen[v.Name()]; ok {
			return fmt.Errorf("variable %q is given twice (at %d and %d)", v.Name(), j, i)
		}
		seen[v.Name()] = i
		if !numeric.IsFloat(v.Dtype()) {
			return fmt.Errorf("%w: variable %q has dtype %v, not float32 or float64", ErrMismatch, v.Name(), v.Dtype())
		}
		if noGrad(grads[i]) {
			continue
		}
		if err := CheckGradient(v, grads[i]); err != nil {
			return err
		}
		if s, ok := grads[i].(towers.IndexedSlices); ok {
			if !s.IsDeduplicated() { // the update only reads it: no copy
				s = s.Deduplicate()
			}
			sparse[i] = &s
		}
	}
	lr, err := o.rate(store)
	if err != nil {
		return err
	}

	// Get or create every slot before writing any value, so that a slot
	// that exists with the wrong shape leaves everything unchanged.
	names := o.slotNames()
	slots := make([][]any, len(vars))
	for i, v := range vars {
		if noGrad(grads[i]) {
			continue
		}
		slots[i] = make([]any, len(names))
		for k, s := range names {
			sv, _, err := store.GetOrCreate(towers.VarSpec{
				Name:     o.slotName(v.Name(), s),
				Dtype:    v.Dtype(),
				Shape:    v.Shape(),
				Init:     o.slotInit(k),
				Colocate: v.Name(),
			})
			if err != nil {
				return fmt.Errorf("variable %q: slot %q: %w", v.Name(), s, err)
			}
			slots[i][k] = sv.Data()
		}
	}
	st := step{lr: lr}
	if o.c.kind == kindAdam {
		it, err := o.iterations(store, vars)
		if err != nil {
			return err
		}
		if it[0] == math.MaxInt64 {
			return fmt.Errorf("slot %q: iteration count overflows", o.c.name+"/iterations")
		}
		it[0]++
		st.t = it[0]
	}

	sizes := make([]int, len(vars))
	ws := make([]any, len(vars)) // read once here, not per chunk: Data allocates
	for i, v := range vars {
		switch {
		case noGrad(grads[i]):
		case sparse[i] != nil && o.c.rowsOnly():
			sizes[i] = len(sparse[i].Indices) * sparse[i].RowSize()
		default:
			sizes[i] = v.Size()
		}
		if sizes[i] > 0 {
			ws[i] = v.Data()
		}
	}
	k32, k64 := newKernel[float32](&o.c, st), newKernel[float64](&o.c, st)
	// Every element updates independently: spread chunks over the cores.
	// A sparse gradient's chunks are of its rows' elements when only its
	// rows update, else of the variable's.
	return parallel.ForChunks(sizes, func(i, lo, hi int) error {
		switch w := ws[i].(type) {
		case []float32:
			applyRange(k32, w, grads[i], sparse[i], slots[i], lo, hi)
		case []float64:
			applyRange(k64, w, grads[i], sparse[i], slots[i], lo, hi)
		}
		return nil
	})
}

// rate returns the learning rate of this Apply: the constant one, or the
// schedule's rate at the store's global step.
func (o *optimizer) rate(store *towers.Store) (float64, error) {
	if o.c.sched == nil {
		return o.c.lr, nil
	}
	gs, err := store.Lookup(towers.GlobalStepName)
	if err != nil {
		return 0, fmt.Errorf("learning rate schedule %v needs the global step: %w", o.c.sched, err)
	}
	s, ok := gs.Data().([]int64)
	if !ok || len(s) != 1 || len(gs.Shape()) != 0 {
		return 0, fmt.Errorf("learning rate schedule %v: global step %q has dtype %v shape %v, not an int64 scalar",
			o.c.sched, towers.GlobalStepName, gs.Dtype(), gs.Shape())
	}
	lr := o.c.sched.Rate(s[0])
	if !finiteNonNegative(lr) {
		return 0, fmt.Errorf("%w: learning rate schedule %v gives %v at step %d, not finite and non-negative", ErrConfig, o.c.sched, lr, s[0])
	}
	if o.c.kind == kindFTRL && lr == 0 {
		return 0, fmt.Errorf("%w: learning rate schedule %v gives 0 at step %d: FTRL divides by its learning rate", ErrConfig, o.c.sched, s[0])
	}
	return lr, nil
}

// iterations gets or creates the scalar int64 step counter "<Name>/iterations".
// Like TensorFlow's Adam beta powers, it is placed with the variable of
// least name, so its device does not depend on the order of vars.
func (o *optimizer) iterations(store *towers.Store, vars []*towers.Variable) ([]int64, error) {
	spec := towers.VarSpec{Name: o.c.name + "/iterations", Dtype: tensor.Int64}
	if len(vars) > 0 {
		spec.Colocate = slices.MinFunc(vars, func(a, b *towers.Variable) int {
			return strings.Compare(a.Name(), b.Name())
		}).Name()
	}
	v, _, err := store.GetOrCreate(spec)
	if err != nil {
		return nil, fmt.Errorf("iteration count: %w", err)
	}
	it, ok := v.Data().([]int64)
	if !ok || len(it) != 1 {
		return nil, fmt.Errorf("iteration count %q holds %T, not one int64", spec.Name, v.Data())
	}
	return it, nil
}

// noGrad reports whether g means "no gradient": nil, or a nil []float32 or
// []float64.
func noGrad(g any) bool {
	switch g := g.(type) {
	case nil:
		return true
	case []float32:
		return g == nil
	case []float64:
		return g == nil
	}
	return false
}

// CheckGradient is an error, wrapping ErrMismatch and naming the
// variable, unless g is a []float32 or []float64 of v's dtype and size, or
// a towers.IndexedSlices of v's dtype and shape whose every index is in
// range (CheckFor): what an optimizer's Apply checks of every gradient
// before it writes.
func CheckGradient(v *towers.Variable, g any) error {
	ok := false
	n := -1
	switch g := g.(type) {
	case towers.IndexedSlices:
		if err := g.CheckFor(v); err != nil {
			return fmt.Errorf("%w: %w", ErrMismatch, err)
		}
		return nil
	case []float32:
		ok, n = v.Dtype() == tensor.Float32, len(g)
	case []float64:
		ok, n = v.Dtype() == tensor.Float64, len(g)
	}
	if n < 0 {
		return fmt.Errorf("%w: variable %q (%v): gradient is a %T, not a []float32, []float64 or towers.IndexedSlices", ErrMismatch, v.Name(), v.Dtype(), g)
	}
	if !ok || n != v.Size() {
		return fmt.Errorf("%w: variable %q has dtype %v and %d elements (shape %v), its gradient is a %T of %d elements",
			ErrMismatch, v.Name(), v.Dtype(), v.Size(), v.Shape(), g, n)
	}
	return nil
}
