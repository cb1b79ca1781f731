package serving

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/embedtest"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// sparseBodies returns embedtest.Rows as a predict request in row and
// columnar format and as tf.Example JSON (the examples of a classify or
// regress request; a bag of one id written as a bare value, as tf.Example
// JSON allows).
func sparseBodies(t *testing.T, rows []embedtest.Row) (instances, columnar, examples string) {
	t.Helper()
	bag := func(ids []int64, ws []float64) (any, any) {
		if ids == nil {
			return []int64{}, []float64{}
		}
		return ids, ws
	}
	var inst, ex []map[string]any
	cols := map[string][]any{}
	for _, r := range rows {
		ids, ws := bag(r.IDs, r.Weights)
		inst = append(inst, map[string]any{"cat": ids, "w": ws, "x": []float64{r.X}})
		cols["cat"], cols["w"], cols["x"] = append(cols["cat"], ids), append(cols["w"], ws), append(cols["x"], []float64{r.X})
		e := map[string]any{"cat": ids, "w": ws, "x": r.X}
		if len(r.IDs) == 1 {
			e["cat"], e["w"] = r.IDs[0], r.Weights[0]
		}
		ex = append(ex, e)
	}
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return enc(map[string]any{"instances": inst}), enc(map[string]any{"inputs": cols}), enc(ex)
}

// estimatorPredictions returns Estimator.Predict's "p" of rows.
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

// TestServeSparseInputs serves an export of a model with an embedding over
// a sparse feature (bags of 0 to 4 ids, with weights) and asks predict
// (rows and columns), regress and classify, and predict with request
// batching: every answer equals Estimator.Predict on the same rows.
func TestServeSparseInputs(t *testing.T) {
	ctx := context.Background()
	mdl := replicate.ModelFn(embedtest.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Optimizer: optimizers.SGD(0.1)})
	est, err := estimator.New(mdl, estimator.RunConfig{Seed: 1, LogEvery: -1, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	if err := est.Train(ctx, embedtest.Input(embedtest.Rows, true, -1), estimator.Steps(3)); err != nil {
		t.Fatal(err)
	}
	want := estimatorPredictions(t, est, embedtest.Rows)
	base := t.TempDir()
	if _, err := est.Export(ctx, base, embedtest.Serving); err != nil {
		t.Fatal(err)
	}
	instances, columnar, examples := sparseBodies(t, embedtest.Rows)
	t.Run("formats", func(t *testing.T) {
		_, hs := newTestServer(t, []ModelConfig{{Name: "embed", BaseDir: base, Model: mdl}}, Config{})
		checkServedAsPredict(t, hs, "embed", instances, columnar, examples, want)
	})

	// Batching: a request of one row waits in a batch of 6 rows (only
	// full batches run: the timeout is an hour) until the 5 rows fill
	// it; each gets its own rows' answer, merged sparse inputs and all.
	t.Run("batching", func(t *testing.T) {
		s, hs := newTestServer(t, []ModelConfig{{Name: "embed", BaseDir: base, Model: mdl}}, Config{BatchTimeout: time.Hour, MaxBatchSize: len(embedtest.Rows) + 1})
		joined := make(chan int, 10)
		s.batcher.enqueued = func(_ batchKey, rows int) { joined <- rows }
		oneRow := []embedtest.Row{{IDs: []int64{9, 1}, Weights: []float64{1, 2}, X: 0.5}}
		wantOne := estimatorPredictions(t, est, oneRow)
		oneBody, _, _ := sparseBodies(t, oneRow)
		first := predictAsync(hs, "/v1/models/embed:predict", oneBody)
		if rows := <-joined; rows != 1 {
			t.Fatalf("the first request made a batch of %d rows", rows)
		}
		second := predictAsync(hs, "/v1/models/embed:predict", instances)
		if rows := <-joined; rows != len(embedtest.Rows)+1 {
			t.Fatalf("the second request made a batch of %d rows, want both in one", rows)
		}
		wantPredictions(t, "the request of one row", wantOne, <-first)
		wantPredictions(t, "the request of 5 rows", want, <-second)
	})

	_, hs := newTestServer(t, []ModelConfig{{Name: "embed", BaseDir: base, Model: mdl}}, Config{})
	res := do(t, hs, "GET", "/v1/models/embed/metadata", "")
	if want := `"cat":{"dtype":"DT_INT64","tensor_shape":{"dim":[{"size":"-1","name":""},{"size":"4","name":""}],"unknown_rank":false},"coo_sparse":{"values_tensor_name":"cat/values","indices_tensor_name":"cat/indices","dense_shape_tensor_name":"cat/dense_shape"}}`; res.code != 200 || !strings.Contains(res.body, want) {
		t.Errorf("metadata: status %d: %s\nwant it to contain %s", res.code, res.body, want)
	}
	const path = "/v1/models/embed:predict"
	row := func(cat, w, x string) string {
		return `{"instances": [{"cat": [1], "w": [1], "x": [0]}, {"cat": ` + cat + `, "w": ` + w + `, "x": ` + x + `}]}`
	}
	checkErrors(t, hs, []errorCase{
		{"id out of range", "POST", path, row("[3, 10]", "[1, 1]", "[0]"), 400, `sparse feature "cat": row 1 has id 10, out of range [0, 10)`},
		{"negative id", "POST", path, row("[-2]", "[1]", "[0]"), 400, `sparse feature "cat": row 1 has id -2`},
		{"id out of range, columnar", "POST", path, `{"inputs": {"cat": [[], [0, 11]], "w": [[], [1, 1]], "x": [[0], [0]]}}`, 400, `sparse feature "cat": row 1 has id 11`},
		{"id out of range, regress", "POST", "/v1/models/embed:regress", `{"signature_name": "regress", "examples": [{"cat": 12, "w": 1, "x": 0}]}`, 400, `sparse feature "cat": row 0 has id 12`},
		{"non-integer id", "POST", path, row("[1.5]", "[1]", "[0]"), 400, `instance 1: input "cat" (int64, sparse, at most 4 values per example): JSON Value: 1.5 Type: Number is not of expected type: int64`},
		{"string id", "POST", path, row(`["3"]`, "[1]", "[0]"), 400, `is not of expected type: int64`},
		{"nested too deep", "POST", path, row("[[1, 2]]", "[1]", "[0]"), 400, `value 0 is [1,2], want a single value (a sparse input is a flat list of values per example; nested lists are too deep)`},
		{"nested too deep, columnar", "POST", path, `{"inputs": {"cat": [[[1]]], "w": [[1]], "x": [[0]]}}`, 400, `input "cat" (int64, sparse, at most 4 values per example): example 0: value 0 is [1]`},
		{"bare id in predict", "POST", path, row("3", "[1]", "[0]"), 400, `found 3, want a list of at most 4 values`},
		{"too many ids", "POST", path, row("[1, 2, 3, 4, 5]", "[1, 1, 1, 1, 1]", "[0]"), 400, `found a list of 5 values, want at most 4 (a sparse input)`},
		{"too many ids, classify", "POST", "/v1/models/embed:classify", `{"signature_name": "classify", "examples": [{"cat": [1, 2, 3, 4, 5], "w": [1], "x": 0}]}`, 400, `example 0: feature "cat": found a list of 5 values, want at most 4`},
		{"weights not matching ids", "POST", path, row("[1, 2]", "[1]", "[0]"), 400, `weights "w" have 1 entries, the ids 2`},
	})
}
