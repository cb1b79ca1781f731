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
//
// where <Name> is the optimizer's name ("SGD", "Momentum" or "Adam" unless
// changed with Named). Slot variables are non-trainable, zero-initialised,
// have their variable's dtype and shape and are placed on its device.
//
// The updates follow TensorFlow's optimizers, and the tests check them
// against gorgonia's solvers (VanillaSolver, Momentum, AdamSolver), whose
// state lives in unexported fields that cannot be checkpointed. Arithmetic
// runs in the variable's own dtype: float32 math for float32 variables,
// float64 math for float64 variables.
package optimizers

import (
	"errors"
	"fmt"
	"math"
	"regexp"
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
	// "Momentum", "Adam" by default, changeable with Named.
	Name() string
	// Config describes kind and hyper-parameters, e.g.
	// "Adam(name=Adam,lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08)"; two
	// optimizers with equal Config behave identically (used to check that
	// every tower made the same train-op calls).
	Config() string
	// Apply updates vars in place from grads (grads[i] is a []float32 or
	// []float64 slice with vars[i]'s dtype and size; a nil grads[i], or a nil
	// slice, means no gradient: that variable and its slots are left
	// untouched). Slot
	// variables are got or created in store (non-trainable, colocated with
	// their variable, zero-initialised). One Apply is one step: an iteration
	// counter increments once per Apply.
	//
	// Apply checks every argument before it writes anything, so a returned
	// error leaves every variable and slot value unchanged (slots it needed
	// may have been created, with zero values).
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
)

func (k kind) String() string {
	switch k {
	case kindSGD:
		return "SGD"
	case kindMomentum:
		return "Momentum"
	case kindAdam:
		return "Adam"
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
	eps      float64
	errs     []error
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// Option configures an optimizer. An option that does not apply to the
// optimizer it is given to (Beta1 to SGD, say) makes it invalid.
type Option func(*config)

// nameRE is TensorFlow's rule for op names, which slot names build on.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9.][A-Za-z0-9_.\-/]*$`)

// Named sets the optimizer's name, the prefix of its slot variables: two
// optimizers on one store need different names. The name must be a
// TensorFlow op name ([A-Za-z0-9.][A-Za-z0-9_.-/]*) not ending in "/".
func Named(name string) Option {
	return func(c *config) {
		if !nameRE.MatchString(name) || strings.HasSuffix(name, "/") {
			c.fail("name %q is not a valid name (letters, digits, '_', '.', '-', '/'; not starting with '_', '-' or '/' nor ending with '/')", name)
			return
		}
		c.name = name
	}
}

// UseNesterov makes Momentum use Nesterov momentum, as TensorFlow's
// MomentumOptimizer(use_nesterov=True): accum = momentum*accum + g;
// w -= lr*(g + momentum*accum).
func UseNesterov() Option {
	return func(c *config) {
		if c.kind != kindMomentum {
			c.fail("option UseNesterov applies to Momentum only, not %v", c.kind)
			return
		}
		c.nesterov = true
	}
}

// Beta1 sets Adam's exponential decay rate of the first moment, in [0, 1).
func Beta1(b float64) Option { return adamBeta("Beta1", "beta1", b, func(c *config) { c.beta1 = b }) }

// Beta2 sets Adam's exponential decay rate of the second moment, in [0, 1).
func Beta2(b float64) Option { return adamBeta("Beta2", "beta2", b, func(c *config) { c.beta2 = b }) }

func adamBeta(option, name string, b float64, set func(*config)) Option {
	return func(c *config) {
		if c.kind != kindAdam {
			c.fail("option %s applies to Adam only, not %v", option, c.kind)
			return
		}
		if !(b >= 0 && b < 1) {
			c.fail("%s %v is not in [0, 1)", name, b)
		}
		set(c)
	}
}

// Epsilon sets Adam's epsilon, added to sqrt(vhat) in the denominator; it
// must be finite and non-negative.
func Epsilon(eps float64) Option {
	return func(c *config) {
		if c.kind != kindAdam {
			c.fail("option Epsilon applies to Adam only, not %v", c.kind)
			return
		}
		if !(eps >= 0) || math.IsInf(eps, 0) {
			c.fail("epsilon %v is not finite and non-negative", eps)
		}
		c.eps = eps
	}
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
	}
	if err := o.err(); err != nil {
		fmt.Fprintf(&b, ",invalid=%q", err.Error())
	}
	b.WriteString(")")
	return b.String()
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
		if err := checkGrad(v, grads[i]); err != nil {
			return err
		}
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
				Colocate: v.Name(),
			})
			if err != nil {
				return fmt.Errorf("variable %q: slot %q: %w", v.Name(), s, err)
			}
			slots[i][k] = sv.Data()
		}
	}
	var t int64
	if o.c.kind == kindAdam {
		it, err := o.iterations(store, vars)
		if err != nil {
			return err
		}
		if it[0] == math.MaxInt64 {
			return fmt.Errorf("slot %q: iteration count overflows", o.c.name+"/iterations")
		}
		it[0]++
		t = it[0]
	}

	sizes := make([]int, len(vars))
	ws := make([]any, len(vars)) // read once here, not per chunk: Data allocates
	for i, v := range vars {
		if !noGrad(grads[i]) {
			sizes[i] = v.Size()
			ws[i] = v.Data()
		}
	}
	// Every element updates independently: spread chunks over the cores.
	return parallel.ForChunks(sizes, func(i, lo, hi int) error {
		switch w := ws[i].(type) {
		case []float32:
			updateRange(&o.c, w, grads[i].([]float32), slots[i], lo, hi, t)
		case []float64:
			updateRange(&o.c, w, grads[i].([]float64), slots[i], lo, hi, t)
		}
		return nil
	})
}

// updateRange applies update to elements [lo, hi) of w, g and the slots,
// allocating nothing.
func updateRange[T numeric.Float](c *config, w, g []T, slots []any, lo, hi int, t int64) {
	var buf [maxSlots][]T
	s := buf[:len(slots)]
	for k, slot := range slots {
		s[k] = slot.([]T)[lo:hi]
	}
	update(c, w[lo:hi], g[lo:hi], s, t)
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

func checkGrad(v *towers.Variable, g any) error {
	ok := false
	n := -1
	switch g := g.(type) {
	case []float32:
		ok, n = v.Dtype() == tensor.Float32, len(g)
	case []float64:
		ok, n = v.Dtype() == tensor.Float64, len(g)
	}
	if n < 0 {
		return fmt.Errorf("%w: variable %q (%v): gradient is a %T, not a []float32 or []float64", ErrMismatch, v.Name(), v.Dtype(), g)
	}
	if !ok || n != v.Size() {
		return fmt.Errorf("%w: variable %q has dtype %v and %d elements (shape %v), its gradient is a %T of %d elements",
			ErrMismatch, v.Name(), v.Dtype(), v.Size(), v.Shape(), g, n)
	}
	return nil
}

// update applies one step to w from g, in T arithmetic. slots are the
// variable's slots in slotNames order; t is Adam's step count from 1.
func update[T numeric.Float](c *config, w, g []T, slots [][]T, t int64) {
	lr := T(c.lr)
	switch c.kind {
	case kindSGD:
		numeric.Axpy(-lr, g, w) // w - lr·g, bit for bit
	case kindMomentum:
		mom := T(c.momentum)
		acc := slots[0]
		if c.nesterov {
			for i, gi := range g {
				acc[i] = mom*acc[i] + gi
				w[i] -= lr * (gi + mom*acc[i])
			}
			return
		}
		for i, gi := range g {
			acc[i] = mom*acc[i] + gi
			w[i] -= lr * acc[i]
		}
	case kindAdam:
		b1, b2, eps := T(c.beta1), T(c.beta2), T(c.eps)
		omb1, omb2 := 1-b1, 1-b2
		// The bias corrections are computed in float64, as gorgonia does.
		corr1 := T(1 - math.Pow(c.beta1, float64(t)))
		corr2 := T(1 - math.Pow(c.beta2, float64(t)))
		m, v := slots[0], slots[1]
		for i, gi := range g {
			m[i] = b1*m[i] + omb1*gi
			v[i] = b2*v[i] + omb2*gi*gi
			mhat := m[i] / corr1
			vhat := v[i] / corr2
			w[i] -= lr * mhat / (T(math.Sqrt(float64(vhat))) + eps)
		}
	}
}
