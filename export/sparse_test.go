package export_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/embedtest"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// exportEmbed trains embedtest.Model a few steps on n towers and exports
// it with its sparse serving inputs.
func exportEmbed(t *testing.T, n int) (*estimator.Estimator, *replicate.Model, string) {
	t.Helper()
	mdl := replicate.ModelFn(embedtest.Model, replicate.Config{Devices: towers.CPUs(n), Optimizer: optimizers.SGD(0.1), Reduction: replicate.BatchMean})
	est, err := estimator.New(mdl, estimator.RunConfig{ModelDir: t.TempDir(), Seed: 1, LogEvery: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	if err := est.Train(context.Background(), embedtest.Input(embedtest.Rows, true, -1), estimator.Steps(3)); err != nil {
		t.Fatal(err)
	}
	dir, err := est.Export(context.Background(), t.TempDir(), embedtest.Serving)
	if err != nil {
		t.Fatal(err)
	}
	return est, mdl, dir
}

// estimatorPredictions returns Estimator.Predict's "p" of rows, in order.
func estimatorPredictions(t *testing.T, est *estimator.Estimator, rows []embedtest.Row) []float64 {
	t.Helper()
	var got []float64
	for p, err := range est.Predict(context.Background(), embedtest.Input(rows, false, 1)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p["p"].Data().([]float64)...)
	}
	return got
}

// TestExportSparseInputs exports a model with an embedding over a sparse
// feature, loads it on 1 to 3 towers and runs it: the predictions equal
// Estimator.Predict's on the same rows (a row without ids included).
func TestExportSparseInputs(t *testing.T) {
	est, _, dir := exportEmbed(t, 2)
	want := estimatorPredictions(t, est, embedtest.Rows)
	if len(want) != len(embedtest.Rows) {
		t.Fatalf("%d predictions of %d rows", len(want), len(embedtest.Rows))
	}
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d towers", n), func(t *testing.T) {
			m := replicate.ModelFn(embedtest.Model, replicate.Config{Devices: towers.CPUs(n)})
			p := load(t, dir, m)
			b := embedtest.Batch(embedtest.Rows, false)
			for _, sig := range []string{"serving_default", "regress"} {
				out, err := p.RunSparse(context.Background(), sig, b.Features, b.Sparse)
				if err != nil {
					t.Fatal(err)
				}
				name := "p"
				if sig == "regress" {
					name = "outputs"
				}
				if diff := cmp.Diff(want, out[name].Data()); diff != "" {
					t.Errorf("%s: predictions (-Estimator.Predict +export):\n%s", sig, diff)
				}
			}
		})
	}
}

// TestSparseSignaturesRoundTrip reads signatures.json of an export with
// sparse inputs: they are recorded as sparse, with their most values per
// example, and Predictor.Signatures gives them back.
func TestSparseSignaturesRoundTrip(t *testing.T) {
	_, _, dir := exportEmbed(t, 1)
	b, err := os.ReadFile(filepath.Join(dir, exportdir.SignaturesFile))
	if err != nil {
		t.Fatal(err)
	}
	var sigs exportdir.Signatures
	if err := json.Unmarshal(b, &sigs); err != nil {
		t.Fatal(err)
	}
	wantInputs := map[string]export.TensorInfo{
		"cat": {Dtype: "int64", Shape: []int{-1, embedtest.Width}, Sparse: true},
		"w":   {Dtype: "float64", Shape: []int{-1, embedtest.Width}, Sparse: true},
		"x":   {Dtype: "float64", Shape: []int{-1, 1}},
	}
	for key, sig := range sigs.Signatures {
		if diff := cmp.Diff(wantInputs, sig.Inputs); diff != "" {
			t.Errorf("signatures.json: signature %q: inputs (-want +got):\n%s", key, diff)
		}
	}
	p := load(t, dir, replicate.ModelFn(embedtest.Model, replicate.Config{Devices: towers.CPUs(1)}))
	if diff := cmp.Diff(sigs.Signatures, p.Signatures()); diff != "" {
		t.Errorf("Predictor.Signatures (-signatures.json +got):\n%s", diff)
	}
}

// TestSparseRunErrors runs requests with bad sparse inputs: each is an
// error wrapping ErrBadInput that names the input and what is wrong.
func TestSparseRunErrors(t *testing.T) {
	_, _, dir := exportEmbed(t, 1)
	p := load(t, dir, replicate.ModelFn(embedtest.Model, replicate.Config{Devices: towers.CPUs(2)}))
	good := func() estimator.Batch { return embedtest.Batch(embedtest.Rows, false) }
	ids := func(b estimator.Batch, vals ...int64) estimator.Batch {
		s := b.Sparse["cat"]
		copy(s.Values.Data().([]int64), vals)
		return b
	}
	tests := []struct {
		name  string
		batch estimator.Batch
		want  []string
	}{
		{"id out of range", ids(good(), 3, 7, 9, 12), []string{`sparse feature "cat"`, "row 2", "id 12", "out of range [0, 10)"}},
		{"negative id", ids(good(), -1), []string{`sparse feature "cat"`, "row 0", "id -1"}},
		{"sparse input given dense", func() estimator.Batch {
			b := good()
			delete(b.Sparse, "cat")
			b.Features["cat"] = tensor.New(tensor.WithShape(5, 4), tensor.WithBacking(make([]int64, 20)))
			return b
		}(), []string{`input "cat" is dense`, "sparse, dtype int64 dense shape [-1 4]"}},
		{"dense input given sparse", func() estimator.Batch {
			b := good()
			b.Sparse["x"] = sharding.SparseCOO{Indices: [][]int{}, Values: tensor.New(tensor.WithShape(0), tensor.WithBacking([]float64{})), DenseShape: []int{5, 1}}
			delete(b.Features, "x")
			return b
		}(), []string{`input "x" is sparse`, "dtype float64 shape [-1 1]"}},
		{"too many values per example", func() estimator.Batch {
			b := good()
			s := b.Sparse["cat"]
			s.DenseShape = []int{5, 5}
			b.Sparse["cat"] = s
			return b
		}(), []string{`input "cat" has dense shape [5 5]`, "at most 4 values per example"}},
		{"wrong dtype", func() estimator.Batch {
			b := good()
			s := b.Sparse["cat"]
			s.Values = tensor.New(tensor.WithShape(10), tensor.WithBacking(make([]int32, 10)))
			b.Sparse["cat"] = s
			return b
		}(), []string{`input "cat" has dtype int32`}},
		{"malformed", func() estimator.Batch {
			b := good()
			s := b.Sparse["cat"]
			s.Indices[0] = []int{9, 0}
			b.Sparse["cat"] = s
			return b
		}(), []string{`input "cat"`, "out of range for dense shape [5 4]"}},
		{"missing", func() estimator.Batch {
			b := good()
			delete(b.Sparse, "w")
			return b
		}(), []string{`missing input "w" (sparse`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.RunSparse(context.Background(), "serving_default", tc.batch.Features, tc.batch.Sparse)
			if !errors.Is(err, export.ErrBadInput) {
				t.Errorf("error %v, want one wrapping ErrBadInput", err)
			}
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

// TestLoadSparseSignatureErrors loads exports whose signatures.json
// declares sparse tensors Load refuses: a sparse output, a sparse input
// of another rank, an input sparse in one signature and dense in another.
func TestLoadSparseSignatureErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(*exportdir.Signatures)
		want []string
	}{
		{"sparse output", func(s *exportdir.Signatures) {
			sig := s.Signatures["regress"]
			o := sig.Outputs["outputs"]
			o.Sparse = true
			sig.Outputs["outputs"] = o
		}, []string{`signature "regress": output "outputs" is sparse`}},
		{"sparse input of rank 1", func(s *exportdir.Signatures) {
			for _, sig := range s.Signatures {
				sig.Inputs["cat"] = export.TensorInfo{Dtype: "int64", Shape: []int{-1}, Sparse: true}
			}
		}, []string{`input "cat"`, "sparse, shape [-1]", "want [-1, the most values per example]"}},
		{"sparse input of rank 3", func(s *exportdir.Signatures) {
			for _, sig := range s.Signatures {
				sig.Inputs["cat"] = export.TensorInfo{Dtype: "int64", Shape: []int{-1, 2, 2}, Sparse: true}
			}
		}, []string{`input "cat"`, "sparse, shape [-1 2 2]"}},
		{"sparse here, dense there", func(s *exportdir.Signatures) {
			s.Signatures["regress"].Inputs["cat"] = export.TensorInfo{Dtype: "int64", Shape: []int{-1, embedtest.Width}}
		}, []string{`input "cat"`, "another signature gives it as", "sparse, dtype int64"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, dir := exportEmbed(t, 1)
			rewriteSignatures(t, dir, tc.edit)
			p, err := export.Load(dir, replicate.ModelFn(embedtest.Model, replicate.Config{Devices: towers.CPUs(1)}))
			if err == nil {
				p.Close()
			}
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}
