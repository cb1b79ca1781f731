package estimator_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

func TestExportWritesVersions(t *testing.T) {
	ctx := context.Background()
	modelDir, base := t.TempDir(), t.TempDir()
	est, err := estimator.New(replicate.ModelFn(scaleModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{ModelDir: modelDir, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	inputs := estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}
	if _, err := est.Export(ctx, base, inputs); err == nil || !strings.Contains(err.Error(), "no checkpoint") {
		t.Errorf("export before training: %v", err)
	}
	if err := est.Train(ctx, scaleInput(t, 1), estimator.Steps(2)); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for range 3 {
		dir, err := est.Export(ctx, base, inputs, estimator.KeepVersions(2))
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, filepath.Base(dir))
	}
	if diff := cmp.Diff([]string{"1", "2", "3"}, dirs); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	vs, err := estimator.Versions(base)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{2, 3}, vs); diff != "" {
		t.Errorf("kept versions (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(filepath.Join(base, "3", exportdir.SignaturesFile))
	if err != nil {
		t.Fatal(err)
	}
	var sigs exportdir.Signatures
	if err := json.Unmarshal(data, &sigs); err != nil {
		t.Fatal(err)
	}
	// scaleModel has no export outputs: the default signature serves its
	// predictions.
	want := exportdir.Signatures{Format: exportdir.Format, Step: 2, Signatures: map[string]exportdir.Signature{
		model.DefaultServingSignature: {
			Method:  "predict",
			Inputs:  map[string]exportdir.TensorInfo{"x": {Dtype: "float64", Shape: []int{-1, 1}}},
			Outputs: map[string]exportdir.TensorInfo{"pred": {Dtype: "float64", Shape: []int{-1, 1}}},
		},
	}}
	if diff := cmp.Diff(want, sigs); diff != "" {
		t.Errorf("signatures (-want +got):\n%s", diff)
	}
	for _, bad := range []struct {
		in   estimator.ServingInput
		want string
	}{
		{nil, "no serving inputs"},
		{estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{0}}}, "positive"},
		{estimator.ServingInput{"x": {Shape: []int{1}}}, "no dtype"},
		// Loading allows one example of at most 1 GiB: Export checks the
		// same before it allocates one.
		{estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1 << 40}}}, `serving input "x" of float64: one example is too large: shape [1099511627776] is too large`},
		{estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1<<27 + 1}}}, `serving input "x" of float64: one example is too large: shape [134217729] is too large`},
		{estimator.ServingInput{"x": {Dtype: tensor.Uint8, Shape: []int{1 << 40, 1 << 40}}}, `serving input "x" of uint8: one example is too large: shape [1099511627776 1099511627776] is too large`},
	} {
		if _, err := est.Export(ctx, base, bad.in); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("export %v: got %v, want %q", bad.in, err, bad.want)
		}
	}
}

// namedScaleModel is scaleModel with a classify signature of its
// prediction (one score column) whose classes are named names, its
// classes output given when classes is set.
func namedScaleModel(names []string, classes bool) model.Fn {
	return func(t *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
		spec, err := scaleModel(t, mode, f, l, p)
		if err != nil {
			return nil, err
		}
		out := model.ClassificationOutput{Scores: spec.Predictions["pred"], ClassNames: names}
		if classes {
			out.Classes = spec.Predictions["pred"]
		}
		spec.ExportOutputs = map[string]model.ExportOutput{"classify": &out}
		return spec, nil
	}
}

// TestExportClassNames: the class names of a classification output are
// written in its signature, and names that do not fit its outputs are an
// error.
func TestExportClassNames(t *testing.T) {
	inputs := estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}
	tests := []struct {
		name    string
		names   []string
		classes bool
		want    []string // the names written
		err     string
	}{
		{"named", []string{"yes"}, false, []string{"yes"}, ""},
		{"unnamed", nil, false, nil, ""},
		{"too many names", []string{"yes", "no"}, false, nil, `signature "classify": 2 class names for 1 "scores" columns`},
		{"names of float classes", []string{"yes"}, true, nil, `signature "classify": class names with a "classes" output of dtype float64: want integer class indexes`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, err := estimator.New(replicate.ModelFn(namedScaleModel(tc.names, tc.classes), replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{LogEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			dir, err := est.Export(context.Background(), t.TempDir(), inputs, estimator.AllowUntrained())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("Export: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, exportdir.SignaturesFile))
			if err != nil {
				t.Fatal(err)
			}
			var sigs exportdir.Signatures
			if err := json.Unmarshal(data, &sigs); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sigs.Signatures["classify"].ClassNames); diff != "" {
				t.Errorf("class names written (-want +got):\n%s", diff)
			}
			if strings.Contains(string(data), "class_names") != (tc.want != nil) {
				t.Errorf("signatures.json:\n%s", data)
			}
		})
	}
}
