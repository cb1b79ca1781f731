package checkpoint

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// modelVar is a variable model code asks for through a Scope.
type modelVar struct {
	name  string
	dt    tensor.Dtype
	shape tensor.Shape
}

// askAll asks a scope of store for vars as model code does.
func askAll(t *testing.T, store *towers.Store, vars []modelVar) {
	t.Helper()
	scope := towers.NewScope(0, 1, towers.CPU(0), store, nil)
	for _, v := range vars {
		if _, err := scope.Variable(v.name, v.dt, v.shape, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRestoreIsStrictAboutTheModel: the model's variables that a
// checkpoint lacks are an error naming them and the checkpoint's others,
// and nothing is written; as in TensorFlow, "Key not found in checkpoint".
func TestRestoreIsStrictAboutTheModel(t *testing.T) {
	dir := t.TempDir()
	path, err := Save(dir, newStore(t, testVars, 1), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		model []modelVar
		want  *MismatchError // nil: restores
	}{
		{name: "the checkpoint's variables", model: []modelVar{{"dense/w", tensor.Float32, tensor.Shape{3, 4}}, {"scale", tensor.Float64, nil}}},
		{
			name:  "a module renamed",
			model: []modelVar{{"net/w", tensor.Float32, tensor.Shape{3, 4}}, {"net/b", tensor.Float32, tensor.Shape{4}}, {"scale", tensor.Float64, nil}},
			want: &MismatchError{Checkpoint: path,
				Missing: []string{`"net/w" (shape [3 4] dtype float32)`, `"net/b" (shape [4] dtype float32)`},
				// Its trainable variables the model does not make.
				Unused: []string{"conv/k", "dense/b", "dense/w"}},
		},
		{
			name:  "a shape and a variable the checkpoint lacks",
			model: []modelVar{{"dense/b", tensor.Float32, tensor.Shape{5}}, {"extra", tensor.Float64, tensor.Shape{2}}},
			want: &MismatchError{Checkpoint: path,
				Missing: []string{`"extra" (shape [2] dtype float64)`},
				Differ:  []string{`variable "dense/b" has shape [5] dtype float32 in the model but shape [4] dtype float32 in checkpoint ` + path},
				Unused:  []string{"conv/k", "dense/w", "scale"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := towers.NewStore(towers.StoreConfig{})
			askAll(t, store, tt.model)
			before := snapshot(store)
			err := r.Restore(store)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var got *MismatchError
			if !errors.As(err, &got) {
				t.Fatalf("Restore = %v, want a *MismatchError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, snapshot(store)); diff != "" {
				t.Errorf("store changed by a failed restore (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCompare: the checkpoint's variables a model does not make are an
// error only where the caller says so, and then listed.
func TestCompare(t *testing.T) {
	dir := t.TempDir()
	path, err := Save(dir, newStore(t, testVars[:5], 1), 3, 0) // dense/w, dense/b, scale, conv/k, dense/w/Adam/m
	if err != nil {
		t.Fatal(err)
	}
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := towers.NewStore(towers.StoreConfig{})
	askAll(t, store, []modelVar{{"dense/w", tensor.Float32, tensor.Shape{3, 4}}, {"dense/b", tensor.Float32, tensor.Shape{4}}, {"scale", tensor.Float64, nil}})
	model := store.Variables()
	trainable := func(e Entry) bool { return e.Trainable }
	all := func(Entry) bool { return true }
	tests := []struct {
		name   string
		unused func(Entry) bool
		want   []string // MismatchError.Unused; nil: no error
	}{
		{"unused checkpoint variables allowed", nil, nil},
		{"trainable ones are not", trainable, []string{"conv/k"}},
		{"none are", all, []string{"conv/k", "dense/w/Adam/m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.Compare(model, tt.unused)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var got *MismatchError
			if !errors.As(err, &got) {
				t.Fatalf("Compare = %v, want a *MismatchError", err)
			}
			if diff := cmp.Diff(&MismatchError{Checkpoint: path, Unused: tt.want}, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestModelAsksRestoredVariableWithAnotherShape: model code asking for a
// restored variable in another shape or dtype gets a new variable of its
// own, in the checkpoint's variable's place, and the store says which is
// the model's and which the checkpoint's until a checkpoint that fits is
// restored; no checkpoint is saved meanwhile.
func TestModelAsksRestoredVariableWithAnotherShape(t *testing.T) {
	dir := t.TempDir()
	path, err := Save(dir, newStore(t, testVars, 1), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := towers.NewStore(towers.StoreConfig{})
	if err := r.Restore(store); err != nil {
		t.Fatal(err)
	}
	scope := towers.NewScope(0, 1, towers.CPU(0), store, nil)
	if _, err := scope.Variable("dense/w", tensor.Float32, tensor.Shape{4, 4}, nil); err != nil {
		t.Fatal(err)
	}
	v, err := store.Lookup("dense/w")
	if err != nil {
		t.Fatal(err)
	}
	why := `variable "dense/w" has shape [4 4] dtype float32 in the model but shape [3 4] dtype float32 in checkpoint ` + path
	type got struct {
		Shape             []int
		Names             []string
		Mismatched, Again []string
		SaveErr           bool
		AfterRestore      []string
	}
	g := got{Shape: v.Shape(), Names: store.Names(), Mismatched: store.Mismatched(), Again: store.Mismatched()}
	_, err = Save(t.TempDir(), store, 4, 0)
	g.SaveErr = err != nil && strings.Contains(err.Error(), why)
	// A checkpoint of the model's shapes restored: over.
	fits := towers.NewStore(towers.StoreConfig{})
	for _, v := range store.Variables() {
		if _, _, err := fits.GetOrCreate(towers.VarSpec{Name: v.Name(), Dtype: v.Dtype(), Shape: v.Shape(), Trainable: v.Trainable()}); err != nil {
			t.Fatal(err)
		}
	}
	fitsDir := t.TempDir()
	if _, err := Save(fitsDir, fits, 5, 0); err != nil {
		t.Fatal(err)
	}
	fr, err := Read(fitsDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := fr.Restore(store); err != nil {
		t.Fatal(err)
	}
	g.AfterRestore = store.Mismatched()
	want := got{Shape: []int{4, 4}, Names: newStore(t, testVars, 1).Names(), Mismatched: []string{why}, Again: []string{why}, SaveErr: true}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
