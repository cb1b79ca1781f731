package towers

import (
	"fmt"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
)

// The weights of a model are its trainable variables: what workers exchange
// when they average weights or gradients. Optimizer slots, the global step
// and other non-trainable variables are not weights; checkpoints carry those.

func (s *Store) weights() []*Variable {
	var out []*Variable
	for _, v := range s.order {
		if v.trainable {
			out = append(out, v)
		}
	}
	return out
}

// WeightVariables returns the weights, the trainable variables, in
// creation order: the layout of Flat and SetFlat.
func (s *Store) WeightVariables() []*Variable {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.weights()
}

// Weights returns a copy of every trainable variable by name.
func (s *Store) Weights() map[string]*tensor.Dense {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]*tensor.Dense{}
	for _, v := range s.weights() {
		out[v.name] = numeric.Over(v.shape, numeric.Copy(v.backing))
	}
	return out
}

// SetWeights copies each given tensor into the trainable variable of that
// name. A name the store does not hold as a weight, or a shape or dtype
// mismatch, is an error and nothing is written.
func (s *Store) SetWeights(values map[string]*tensor.Dense) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := map[string]*Variable{}
	for _, v := range s.weights() {
		ws[v.name] = v
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v, ok := ws[name]
		if !ok {
			return fmt.Errorf("set weights: %q is not a weight (weights: %s)", name, joinNames(s.weights()))
		}
		val := values[name]
		if val == nil || !val.Shape().Eq(v.shape) || val.Dtype() != v.dtype {
			return fmt.Errorf("set weights: %q has shape %v dtype %v, value has %v", name, v.shape, v.dtype, describe(val))
		}
	}
	for _, name := range names {
		if err := ws[name].set(values[name]); err != nil {
			return fmt.Errorf("set weights: %w", err)
		}
	}
	return nil
}

func describe(t *tensor.Dense) string {
	if t == nil {
		return "nil"
	}
	return fmt.Sprintf("shape %v dtype %v", t.Shape(), t.Dtype())
}

func joinNames(vs []*Variable) string {
	if len(vs) == 0 {
		return "none"
	}
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.name
	}
	return strings.Join(names, ", ")
}

// FlatSize is the number of elements over all weights.
func (s *Store) FlatSize() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, v := range s.weights() {
		n += v.Size()
	}
	return n
}

// Flat returns every weight, in creation order, flattened row-major into one
// float64 vector (float32 weights convert exactly).
func (s *Store) Flat() ([]float64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ws := s.weights()
	n := 0
	for _, v := range ws {
		n += numeric.Len(v.backing)
	}
	out := make([]float64, 0, n)
	for _, v := range ws {
		switch d := v.backing.(type) {
		case []float64:
			out = append(out, d...)
		case []float32:
			for _, x := range d {
				out = append(out, float64(x))
			}
		default:
			vals, err := numeric.SliceFloat64s(v.backing)
			if err != nil {
				return nil, fmt.Errorf("flat: weight %q: %w", v.name, err)
			}
			out = append(out, vals...)
		}
	}
	return out, nil
}

// SetFlat sets every weight from one vector laid out as Flat lays it out;
// its length must equal FlatSize exactly. float32 weights round to nearest.
func (s *Store) SetFlat(flat []float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.weights()
	n := 0
	for _, v := range ws {
		if !numeric.IsFloat(v.dtype) {
			return fmt.Errorf("set flat: weight %q has dtype %v, not float32 or float64", v.name, v.dtype)
		}
		n += v.Size()
	}
	if len(flat) != n {
		return fmt.Errorf("set flat: vector has %d elements, the weights have %d", len(flat), n)
	}
	off := 0
	for _, v := range ws {
		if err := numeric.SetFloat64s(v.backing, flat[off:off+v.Size()]); err != nil {
			return fmt.Errorf("set flat: weight %q: %w", v.name, err)
		}
		off += v.Size()
	}
	return nil
}
