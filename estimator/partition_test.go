package estimator_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/embedtest"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
)

// TestPartitionedTableCheckpoint: a model whose table is split into 3
// partitions (4, 3 and 3 rows) checkpoints each partition, and its
// Adagrad slots, as an entry and a file of its own named after the
// partition; 3 steps, a new Estimator restoring them, and 3 more predict
// bit for bit as 6 steps in one run and as the table whole trained 6
// steps. A checkpoint of 3 partitions does not restore into 2 (nor into
// the table whole): the restore's error names the variables.
func TestPartitionedTableCheckpoint(t *testing.T) {
	ctx := context.Background()
	mdl := func(fn model.Fn) *replicate.Model {
		return replicate.ModelFn(fn, replicate.Config{Devices: cpuDevices(2), Optimizer: optimizers.Adagrad(0.1)})
	}
	train := func(fn model.Fn, dir string, steps int64) ([]float64, error) {
		est, err := estimator.New(mdl(fn), estimator.RunConfig{ModelDir: dir, Seed: 1, LogEvery: -1})
		if err != nil {
			return nil, err
		}
		defer est.Close()
		if err := est.Train(ctx, embedtest.Input(embedtest.Rows, true, -1), estimator.Steps(steps)); err != nil {
			return nil, err
		}
		var got []float64
		for p, err := range est.Predict(ctx, embedtest.Input(embedtest.Rows, false, 1)) {
			if err != nil {
				return nil, err
			}
			got = append(got, p["p"].Data().([]float64)...)
		}
		return got, nil
	}
	parts := embedtest.PartitionedModel(3)
	dir := t.TempDir()
	if _, err := train(parts, dir, 3); err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Shape []int
		File  string
	}
	got := map[string]entry{}
	files := map[string]bool{}
	for _, e := range r.Manifest().Variables {
		got[e.Name] = entry{e.Shape, ""}
		files[e.File] = true
	}
	for p, rows := range []int{4, 3, 3} {
		for _, name := range []string{fmt.Sprintf("table/embeddings/part_%d", p), fmt.Sprintf("table/embeddings/part_%d/Adagrad/accumulator", p)} {
			if diff := cmp.Diff(entry{[]int{rows, embedtest.Dim}, ""}, got[name]); diff != "" {
				t.Errorf("checkpoint entry %q (-want +got):\n%s", name, diff)
			}
		}
	}
	if len(files) != len(got) {
		t.Errorf("%d files for %d entries, want one each", len(files), len(got))
	}
	if _, ok := got["table/embeddings"]; ok {
		t.Errorf("checkpoint has the whole table besides its partitions")
	}
	resumed, err := train(parts, dir, 3) // 3 more
	if err != nil {
		t.Fatal(err)
	}
	once, err := train(parts, t.TempDir(), 6)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := train(embedtest.Model, t.TempDir(), 6)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(once, resumed); diff != "" {
		t.Errorf("3 + 3 steps (-6 in one run +resumed):\n%s", diff)
	}
	if diff := cmp.Diff(whole, resumed); diff != "" {
		t.Errorf("predictions (-table whole +3 partitions):\n%s", diff)
	}
	for _, tc := range []struct {
		name string
		fn   model.Fn
		want []string
	}{
		{"2 partitions", embedtest.PartitionedModel(2), []string{`"table/embeddings/part_0" has shape [5 2]`, "shape [4 2]", "in checkpoint"}},
		{"whole", embedtest.PartitionedModel(1), []string{"table/embeddings"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := train(tc.fn, dir, 1)
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}
