package checkpoint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/towerflow/towerflow/towers"
)

// MismatchError is the error of a model whose variables do not match a
// checkpoint's, TensorFlow's "Key not found in checkpoint": it names the
// checkpoint and every difference, so that a renamed or reshaped variable
// reads as one from the error.
type MismatchError struct {
	// Checkpoint is the checkpoint's path.
	Checkpoint string
	// Missing are the model's variables the checkpoint lacks, each as
	// `"name" (shape [...] dtype ...)`.
	Missing []string
	// Unused are the checkpoint's variables the model does not make, by
	// name: those the comparison holds against the model, and, when it
	// fails anyway, its trainable ones (a renamed variable shows as one
	// missing and one unused).
	Unused []string
	// Differ are the variables both have with another shape or dtype, each
	// saying which is the model's and which the checkpoint's.
	Differ []string
}

func (e *MismatchError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "it lacks the model's variables "+strings.Join(e.Missing, ", "))
	}
	parts = append(parts, e.Differ...)
	if len(e.Unused) > 0 {
		parts = append(parts, fmt.Sprintf("it has variables the model does not make: %q", e.Unused))
	}
	return fmt.Sprintf("the model's variables do not match checkpoint %s: %s", e.Checkpoint, strings.Join(parts, "; "))
}

// Compare compares the variables of a model with the checkpoint's, as
// restoring the checkpoint into the model needs them: every variable of
// model must be in the checkpoint with its shape and dtype. A checkpoint
// variable that model lacks is an error when unused says so (nil: never),
// e.g. for a trainable one, which a training run would otherwise save again
// untouched. It returns a *MismatchError naming every difference, or nil.
func (r *Reader) Compare(model []*towers.Variable, unused func(Entry) bool) error {
	e := &MismatchError{Checkpoint: r.path}
	made := map[string]bool{}
	for _, v := range model {
		made[v.Name()] = true
		i, ok := r.index[v.Name()]
		if !ok {
			e.Missing = append(e.Missing, fmt.Sprintf("%q (shape %v dtype %v)", v.Name(), []int(v.Shape()), v.Dtype()))
			continue
		}
		if d := r.differ(v, v.Name(), i); d != "" {
			e.Differ = append(e.Differ, d)
		}
	}
	var listed []Entry // unused entries held against the model, then the trainable ones
	for _, en := range r.m.Variables {
		if !made[en.Name] && unused != nil && unused(en) {
			listed = append(listed, en)
		}
	}
	if len(e.Missing) == 0 && len(e.Differ) == 0 && len(listed) == 0 {
		return nil
	}
	for _, en := range r.m.Variables {
		if !made[en.Name] && en.Trainable && !slices.ContainsFunc(listed, func(l Entry) bool { return l.Name == en.Name }) {
			listed = append(listed, en)
		}
	}
	for _, en := range listed {
		e.Unused = append(e.Unused, en.Name)
	}
	slices.Sort(e.Unused)
	return e
}

// differ says how the model's variable v differs from checkpoint variable
// i, which the model calls name; "" when it has its shape and dtype.
func (r *Reader) differ(v *towers.Variable, name string, i int) string {
	e, dt := r.m.Variables[i], r.dtypes[i]
	if slices.Equal(v.Shape(), e.Shape) && v.Dtype() == dt {
		return ""
	}
	what := fmt.Sprintf("variable %q", name)
	if e.Name != name {
		what = fmt.Sprintf("variable %q (checkpoint variable %q)", name, e.Name)
	}
	return fmt.Sprintf("%s has shape %v dtype %v in the model but shape %v dtype %v in checkpoint %s",
		what, []int(v.Shape()), v.Dtype(), shapeOf(e.Shape), dt, r.path)
}

// shapeOf is a checkpoint shape as the errors print it, [] for a scalar.
func shapeOf(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}
