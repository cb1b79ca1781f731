package towers

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
)

// GlobalStepName is the name of the global step variable: an int64 scalar,
// not trainable, incremented once per training step after the optimizers
// have run (so during a step it holds the number of steps taken before it).
const GlobalStepName = "global_step"

// VarSpec describes a variable to get or create.
type VarSpec struct {
	Name      string
	Dtype     tensor.Dtype
	Shape     tensor.Shape // empty for a scalar
	Init      Initializer  // nil means Zeros
	Trainable bool
	// Colocate places the variable on the device of the named variable (an
	// optimizer's slot beside its variable) instead of asking the placement.
	Colocate string
	// From names where a variable created here takes its value from: a
	// checkpoint restore gives the checkpoint's path. Model code's first
	// request for the variable with another shape or dtype makes it anew,
	// marked (Mismatched); another later request is an error naming it.
	From string
}

// Variable is the master copy of one named variable.
//
// Its backing slice is allocated once and never replaced: setters copy into
// it, so headers made over it by towers stay valid for the store's life.
type Variable struct {
	name      string
	dtype     tensor.Dtype
	shape     tensor.Shape
	trainable bool
	device    Device
	backing   any // []T of shape.TotalSize() (1 for a scalar)
	// colocate names the variable this one was placed beside, if any.
	colocate string
	// placed: model code has asked for the variable, and the placement
	// has placed it (unless it is colocated).
	placed bool
	// from is VarSpec.From of its creation.
	from string
	// mismatch, when not "", says the model asked for the variable with
	// another shape or dtype than that of the checkpoint it was restored
	// from, and it was made anew: a build asking for it is refused until a
	// checkpoint that fits is restored into it.
	mismatch string
}

// Name returns the variable's name.
func (v *Variable) Name() string { return v.name }

// Dtype returns the variable's element type.
func (v *Variable) Dtype() tensor.Dtype { return v.dtype }

// Shape returns a copy of the variable's shape.
func (v *Variable) Shape() tensor.Shape { return v.shape.Clone() }

// Trainable reports whether optimizers update the variable by default.
func (v *Variable) Trainable() bool { return v.trainable }

// Device returns where the master copy is placed.
func (v *Variable) Device() Device { return v.device }

// Data returns the live master backing, a slice such as []float64 (one
// element for a scalar). Optimizers update it in place between steps; nothing
// may write it while towers run.
func (v *Variable) Data() any { return v.backing }

// Header returns a new tensor header over the master backing (no copy).
func (v *Variable) Header() *tensor.Dense { return numeric.Over(v.shape, v.backing) }

// value is what a tower's node for v is bound to: a header over the master
// backing, or for a float scalar a gorgonia scalar pointing at the master's
// one element, since gorgonia's scalar ops accept only scalar values.
func (v *Variable) value() G.Value {
	if len(v.shape) == 0 {
		switch b := v.backing.(type) {
		case []float64:
			return (*G.F64)(&b[0])
		case []float32:
			return (*G.F32)(&b[0])
		}
	}
	return v.Header()
}

// Size is the number of elements.
func (v *Variable) Size() int { return numeric.Len(v.backing) }

// Placement chooses the device of a model variable (one model code asks a
// Scope for) from its index among the model's variables, in the order model
// code first asks for them (0 for the first). Framework variables (the
// global step, optimizer slots) are not counted.
type Placement func(index int) Device

// RoundRobin places the model's variables over devices in the order model
// code asks for them: the first on devices[0], the second on devices[1], and
// so on, wrapping around.
func RoundRobin(devices ...Device) Placement {
	ds := slices.Clone(devices)
	if len(ds) == 0 {
		ds = []Device{CPU(0)}
	}
	return func(i int) Device { return ds[i%len(ds)] }
}

// Store holds the master value of every variable of one model, by name, in
// creation order. It outlives every graph: towers of any mode and any input
// shape read the same masters. Its methods are safe for concurrent use, but a
// setter must not run while towers are running a step.
type Store struct {
	mu        sync.RWMutex
	seed      uint64
	placement Placement
	ps        Device // where framework variables live
	placed    int    // model variables placed so far, the placement's index
	vars      map[string]*Variable
	order     []*Variable
	mismatch  int // the variables marked mismatched (Mismatched)
}

// StoreConfig configures NewStore; its zero value is seed 0 with every
// variable on CPU:0.
type StoreConfig struct {
	// Seed seeds random initializers. Each variable's random stream depends
	// on the seed and its name only, so initial values do not depend on
	// creation order or tower count.
	Seed uint64
	// Placement places the variables model code creates (through a Scope),
	// counting only those; nil puts them on ParameterServer.
	Placement Placement
	// ParameterServer is where every other variable lives: the global
	// step, and optimizer slots not colocated with their variable. The
	// zero value is CPU:0.
	ParameterServer Device
}

// NewStore returns an empty store configured by cfg.
func NewStore(cfg StoreConfig) *Store {
	s := &Store{vars: map[string]*Variable{}, seed: cfg.Seed, placement: cfg.Placement, ps: cfg.ParameterServer}
	if s.placement == nil {
		ps := s.ps
		s.placement = func(int) Device { return ps }
	}
	return s
}

// ErrNotFound is wrapped by lookups of a name the store does not hold.
var ErrNotFound = errors.New("no such variable")

// GetOrCreate returns the variable named spec.Name, creating and
// initialising it when absent. An existing variable must agree in shape and
// dtype; created reports whether this call made it. A variable created here
// is a framework variable (the global step, an optimizer slot): it is placed
// beside spec.Colocate when given, else on the parameter server; model
// variables come from Scope.Variable.
func (s *Store) GetOrCreate(spec VarSpec) (v *Variable, created bool, err error) {
	return s.getOrCreate(spec, false)
}

// getOrCreate is GetOrCreate; model says a Scope asks for a model variable,
// which the placement places.
func (s *Store) getOrCreate(spec VarSpec, model bool) (v *Variable, created bool, err error) {
	if spec.Name == "" {
		return nil, false, fmt.Errorf("variable: empty name")
	}
	if spec.Dtype.Type == nil {
		return nil, false, fmt.Errorf("variable %q: no dtype", spec.Name)
	}
	for _, d := range spec.Shape {
		if d <= 0 {
			return nil, false, fmt.Errorf("variable %q: shape %v has a non-positive dimension", spec.Name, spec.Shape)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vars[spec.Name]; ok {
		if !v.shape.Eq(spec.Shape) || v.dtype != spec.Dtype {
			switch {
			case v.from != "" && model && !v.placed:
				// The model's variable differs from the checkpoint's: the
				// build goes on with a new variable of the model's, so that
				// the comparison after it names every difference at once
				// (checkpoint.MismatchError). The new variable is marked
				// (Mismatched): no step may run, and no checkpoint be saved,
				// while it is, until a checkpoint that fits is restored.
				i := slices.Index(s.order, v)
				delete(s.vars, spec.Name)
				nv, created, err := s.create(spec, model)
				if err != nil {
					s.vars[spec.Name] = v // as it was
					return nil, false, err
				}
				s.mismatch++
				nv.mismatch = checkpointDiffers(spec, v)
				s.order = slices.Delete(s.order, len(s.order)-1, len(s.order)) // create appended it
				s.order[i] = nv                                                // in the place of the checkpoint's
				return nv, created, err
			case v.from != "" && model:
				return nil, false, errors.New(checkpointDiffers(spec, v))
			case v.from != "":
				return nil, false, fmt.Errorf("variable %q is asked for with shape %v dtype %v but has shape %v dtype %v in checkpoint %s",
					spec.Name, []int(spec.Shape), spec.Dtype, []int(v.shape), v.dtype, v.from)
			}
			return nil, false, fmt.Errorf("variable %q exists with shape %v dtype %v, asked for shape %v dtype %v",
				spec.Name, v.shape, v.dtype, spec.Shape, spec.Dtype)
		}
		if c, ok := s.vars[spec.Colocate]; ok && !model && !v.placed && v.colocate == "" {
			// Restored before its owner asked for it (an optimizer's
			// iteration count, say): it goes beside the variable now.
			v.device, v.colocate = c.device, c.name
		}
		if model && !v.placed {
			s.place(v)
		}
		return v, false, nil
	}
	return s.create(spec, model)
}

// checkpointDiffers says how the model's request spec differs from v,
// restored from checkpoint v.from.
func checkpointDiffers(spec VarSpec, v *Variable) string {
	return fmt.Sprintf("variable %q has shape %v dtype %v in the model but shape %v dtype %v in checkpoint %s",
		spec.Name, []int(spec.Shape), spec.Dtype, []int(v.shape), v.dtype, v.from)
}

// Mismatched says, for each variable the model asked for with another
// shape or dtype than the checkpoint's it was restored from, which is
// which. Such a variable is made anew of the model's shape and holds no
// trained value: no step may run and no checkpoint be saved while one is
// (replicate.Engine and checkpoint.Save refuse), until a checkpoint that
// fits is restored into it (Restored).
func (s *Store) Mismatched() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mismatch == 0 {
		return nil
	}
	var m []string
	for _, v := range s.order {
		if v.mismatch != "" {
			m = append(m, v.mismatch)
		}
	}
	return m
}

// Restored says that variable name holds a checkpoint's value of its own
// shape and dtype now: a mismatch (Mismatched) is over.
func (s *Store) Restored(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vars[name]; ok && v.mismatch != "" {
		v.mismatch = ""
		s.mismatch--
	}
}

// create makes the variable spec says, initialised by its Init (Zeros
// without one); s.mu is held.
func (s *Store) create(spec VarSpec, model bool) (*Variable, bool, error) {
	init := spec.Init
	if init == nil {
		init = Zeros()
	}
	shape := spec.Shape.Clone()
	n := shape.TotalSize()
	if len(shape) == 0 {
		n = 1
	}
	backing := numeric.NewSlice(spec.Dtype, n)
	if err := init(s.rng(spec.Name), spec.Dtype, shape, backing); err != nil {
		return nil, false, fmt.Errorf("variable %q: initialise: %w", spec.Name, err)
	}
	v := &Variable{name: spec.Name, dtype: spec.Dtype, shape: shape, trainable: spec.Trainable, device: s.ps, backing: backing, from: spec.From}
	if c, ok := s.vars[spec.Colocate]; ok {
		v.device, v.colocate = c.device, c.name
	}
	if model {
		s.place(v)
	}
	s.vars[spec.Name] = v
	s.order = append(s.order, v)
	return v, true, nil
}

// place puts a variable model code asked for where the placement says,
// counting model variables only, with the variables colocated with it. A
// variable a checkpoint restore created before the model asked for it
// (on the parameter server) is placed here at the model's first request,
// so a resumed run places variables as a fresh one does.
func (s *Store) place(v *Variable) {
	v.placed = true
	if v.colocate != "" {
		return
	}
	v.device = s.placement(s.placed)
	s.placed++
	for _, u := range s.order {
		if u.colocate == v.name {
			u.device = v.device
		}
	}
}

func (s *Store) rng(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(s.seed, h.Sum64()))
}

// Lookup returns the variable named name.
func (s *Store) Lookup(name string) (*Variable, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lookup(name)
}

func (s *Store) lookup(name string) (*Variable, error) {
	if v, ok := s.vars[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("variable %q: %w (known: %s)", name, ErrNotFound, joinNames(s.order))
}

// Variables returns every variable in creation order.
func (s *Store) Variables() []*Variable {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.order)
}

// Names returns every variable name in creation order.
func (s *Store) Names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, len(s.order))
	for i, v := range s.order {
		names[i] = v.name
	}
	return names
}

// Value returns a copy of the named variable's value.
func (s *Store) Value(name string) (*tensor.Dense, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	return numeric.Over(v.shape, numeric.Copy(v.backing)), nil
}

// Set copies value into the named variable; its shape and dtype must match.
func (s *Store) Set(name string, value *tensor.Dense) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.lookup(name)
	if err != nil {
		return err
	}
	return v.set(value)
}

func (v *Variable) set(value *tensor.Dense) error {
	if value == nil {
		return fmt.Errorf("variable %q: nil value", v.name)
	}
	if !value.Shape().Eq(v.shape) || value.Dtype() != v.dtype {
		return fmt.Errorf("variable %q has shape %v dtype %v, value has shape %v dtype %v",
			v.name, v.shape, v.dtype, value.Shape(), value.Dtype())
	}
	src, err := numeric.Slice(value)
	if err != nil {
		return fmt.Errorf("variable %q: %w", v.name, err)
	}
	return numeric.CopyInto(v.backing, src)
}

// Device returns where the named variable's master copy is placed.
func (s *Store) Device(name string) (Device, error) {
	v, err := s.Lookup(name)
	if err != nil {
		return Device{}, err
	}
	return v.device, nil
}

// FromModel reports whether model code asked for the variable (through a
// Scope): a model weight or model state such as a batch norm's moving
// mean, not a framework variable (the global step, an optimizer slot).
func (v *Variable) FromModel() bool { return v.placed }

// Colocated names the variable this one was placed beside ("" for none):
// an optimizer slot's variable.
func (v *Variable) Colocated() string { return v.colocate }
