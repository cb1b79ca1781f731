package serving

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/embedtest"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TestServePartitionedTable exports a model whose embedding table is
// split into 3 partitions (uneven: 4, 3 and 3 rows) and serves it: after
// 3 steps on 2 towers its served predictions equal, bit for bit, those of
// the same model with the table whole, trained alike; the export holds the
// partitions and no whole table; an id out of range is a 400 naming the
// input, as for a table not partitioned.
func TestServePartitionedTable(t *testing.T) {
	ctx := context.Background()
	train := func(fn func() *replicate.Model) (*replicate.Model, *estimator.Estimator) {
		mdl := fn()
		est, err := estimator.New(mdl, estimator.RunConfig{Seed: 1, LogEvery: -1, Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { est.Close() })
		if err := est.Train(ctx, embedtest.Input(embedtest.Rows, true, -1), estimator.Steps(3)); err != nil {
			t.Fatal(err)
		}
		return mdl, est
	}
	cfg := func() replicate.Config {
		return replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Optimizer: optimizers.Adagrad(0.1)}
	}
	_, whole := train(func() *replicate.Model { return replicate.ModelFn(embedtest.Model, cfg()) })
	want := estimatorPredictions(t, whole, embedtest.Rows)
	mdl, est := train(func() *replicate.Model { return replicate.ModelFn(embedtest.PartitionedModel(3), cfg()) })
	base := t.TempDir()
	dir, err := est.Export(ctx, base, embedtest.Serving)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "variables", "ckpt-*", "*-table~embeddings*.npy"))
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, f := range files {
		_, name, _ := strings.Cut(filepath.Base(f), "-")
		parts = append(parts, name)
	}
	if want := []string{"table~embeddings~part_0.npy", "table~embeddings~part_1.npy", "table~embeddings~part_2.npy"}; !cmp.Equal(want, parts) {
		t.Errorf("export's table files %q, want %q", parts, want)
	}

	_, hs := newTestServer(t, []ModelConfig{{Name: "embed", BaseDir: base, Model: mdl}}, Config{})
	instances, _, _ := sparseBodies(t, embedtest.Rows)
	res := do(t, hs, "POST", "/v1/models/embed:predict", instances)
	if res.code != http.StatusOK {
		t.Fatalf("predict: status %d: %s", res.code, res.body)
	}
	var got struct{ Predictions [][]float64 }
	if err := json.Unmarshal([]byte(res.body), &got); err != nil {
		t.Fatalf("%v: %s", err, res.body)
	}
	var flat []float64
	for _, r := range got.Predictions {
		flat = append(flat, r...)
	}
	if diff := cmp.Diff(want, flat); diff != "" {
		t.Errorf("served predictions (-table whole +partitioned):\n%s", diff)
	}
	checkErrors(t, hs, []errorCase{
		{"id out of range", "POST", "/v1/models/embed:predict", `{"instances": [{"cat": [1], "w": [1], "x": [0]}, {"cat": [9, 10], "w": [1, 1], "x": [0]}]}`, 400, `sparse feature "cat": row 1 has id 10, out of range [0, 10)`},
	})
}
