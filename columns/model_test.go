package columns

import (
	"context"
	"iter"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// modelColumns is a transformer of a column of each kind the model side
// reads, and records for it.
func modelColumns(t *testing.T) (*Transformer, []dataset.Example) {
	t.Helper()
	city := VocabularyList("city", []string{"a", "b", "c"}, OOVBuckets(1))
	tag := Weighted(Identity("tag", 5), "tag_w")
	shared := SharedEmbeddings([]CategoricalColumn{Identity("p", 4), Identity("q", 4)}, 2, Combine(layers.CombineSum))
	tr := mustTransformer(t, Config{Columns: []Column{
		Numeric("x", Shape(2), Normalize(Normalizer{Mean: 1, Stddev: 2}), Default(1)),
		Bucketized(Numeric("age", Default(0)), []float64{18, 65}),
		Indicator(city),
		Embedding(city, 3),
		Embedding(tag, 2, Combine(layers.CombineSqrtN)),
		shared[0], shared[1],
		Crossed([]Crossable{city, RawKey("z")}, 7),
	}})
	exs := []dataset.Example{
		{"x": fl(3, 5), "age": fl(10), "city": by("a", "c", "a"), "tag": in(1, 4), "tag_w": fl(2, 0.5), "p": in(0), "q": in(3, 3), "z": by("u")},
		{"x": fl(1, -1), "age": fl(70), "city": by("zzz"), "p": in(2), "q": in(1), "z": by("v")},
		{"age": fl(30), "tag": in(2), "tag_w": fl(3), "z": by("u")},
		{"x": fl(0, 0), "age": fl(18), "city": by("b"), "p": in(1, 2), "q": in(0), "z": in(5)},
		{"x": fl(2, 2), "age": fl(40), "city": by("c", "b"), "tag": in(0, 0, 3), "tag_w": fl(1, 1, 1)},
	}
	return tr, exs
}

func cpuDevices(n int) []towers.Device {
	ds := make([]towers.Device, n)
	for i := range ds {
		ds[i] = towers.CPU(i)
	}
	return ds
}

// trained is a model over every kind of column of modelColumns, on two
// towers, trained for a few steps: its predictions "input" (InputLayer)
// and "logits" (LinearLogits, also its serving output).
func trained(t *testing.T) (*estimator.Estimator, *replicate.Model, *Transformer, []dataset.Example, func(n int) estimator.InputFn) {
	t.Helper()
	tr, exs := modelColumns(t)
	cols := tr.Columns()
	dense := []Column{cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6]}
	linear := []Column{cols[0], cols[1], cols[2], cols[2].(*IndicatorColumn).Categorical(), cols[4].(*EmbeddingColumn).Categorical(), cols[7]}
	fn := func(s *towers.Scope, mode model.Mode, f model.Features, _ model.Labels, _ model.Params) (*model.Spec, error) {
		in, err := InputLayer(s, f, dense...)
		if err != nil {
			return nil, err
		}
		logits, err := LinearLogits(s, f, 2, linear...)
		if err != nil {
			return nil, err
		}
		spec := &model.Spec{
			Predictions:   map[string]*G.Node{"input": in, "logits": logits},
			ExportOutputs: map[string]model.ExportOutput{model.DefaultServingSignature: model.PredictOutput{Outputs: map[string]*G.Node{"input": in, "logits": logits}}},
		}
		if mode != model.Predict {
			target := G.NewConstant(float32(0.5))
			spec.Loss = G.Must(G.Add(G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(logits, target)))))), G.Must(G.Mean(G.Must(G.Square(in))))))
		}
		return spec, nil
	}
	mdl := replicate.ModelFn(fn, replicate.Config{Devices: cpuDevices(2), Optimizer: optimizers.SGD(0.1), Reduction: replicate.BatchMean})
	est, err := estimator.New(mdl, estimator.RunConfig{ModelDir: t.TempDir(), Seed: 1, LogEvery: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	input := func(n int) estimator.InputFn {
		return func(context.Context) iter.Seq2[estimator.Batch, error] {
			return func(yield func(estimator.Batch, error) bool) {
				for i := 0; n < 0 || i < n; i++ {
					if !yield(tr.Parse(exs)) {
						return
					}
				}
			}
		}
	}
	if err := est.Train(context.Background(), input(-1), estimator.Steps(3)); err != nil {
		t.Fatal(err)
	}
	return est, mdl, tr, exs, input
}

// TestInputLayerAndLinearLogits trains a model over every kind of column
// on two towers for a few steps, then checks its input layer and linear
// logits against the sums written out from the batch and the variables'
// values, and the variables' names and shapes against TensorFlow's.
func TestInputLayerAndLinearLogits(t *testing.T) {
	est, _, tr, exs, input := trained(t)

	wantVars := map[string][]int{
		"input_layer/city_embedding/embedding_weights":                  {4, 3},
		"input_layer/tag_weighted_by_tag_w_embedding/embedding_weights": {5, 2},
		"input_layer/p_q_shared_embedding/embedding_weights":            {4, 2},
		"linear_model/x/weights":                                        {2, 2},
		"linear_model/age_bucketized/weights":                           {3, 2},
		"linear_model/city_indicator/weights":                           {4, 2},
		"linear_model/city/weights":                                     {4, 2},
		"linear_model/tag_weighted_by_tag_w/weights":                    {5, 2},
		"linear_model/city_X_z/weights":                                 {7, 2},
		"linear_model/bias_weights":                                     {2},
	}
	vals := map[string][]float64{}
	gotVars := map[string][]int{}
	for _, name := range est.VariableNames() {
		if !strings.HasPrefix(name, "input_layer/") && !strings.HasPrefix(name, "linear_model/") {
			continue
		}
		v, err := est.VariableValue(name)
		if err != nil {
			t.Fatal(err)
		}
		gotVars[name] = v.Shape()
		for _, x := range v.Data().([]float32) {
			vals[name] = append(vals[name], float64(x))
		}
	}
	if diff := cmp.Diff(wantVars, gotVars); diff != "" {
		t.Fatalf("variables (-want +got):\n%s", diff)
	}
	for _, name := range []string{"linear_model/city/weights", "linear_model/bias_weights"} {
		if slices.Max(vals[name]) == 0 && slices.Min(vals[name]) == 0 {
			t.Errorf("%s did not train", name)
		}
	}

	var out estimator.BatchOutput
	for o, err := range est.PredictBatches(context.Background(), input(1)) {
		if err != nil {
			t.Fatal(err)
		}
		out = o
	}
	got := func(name string) [][]float64 {
		p := out.Predictions[name]
		cols := p.Shape()[1]
		var rows [][]float64
		for i, x := range p.Data().([]float32) {
			if i%cols == 0 {
				rows = append(rows, nil)
			}
			rows[len(rows)-1] = append(rows[len(rows)-1], float64(x))
		}
		return rows
	}
	batch, err := tr.Parse(exs)
	if err != nil {
		t.Fatal(err)
	}
	// row r's ids (and weights) of a sparse feature.
	bagOf := func(name string, r int) (ids []int, ws []float64) {
		s := batch.Sparse[name]
		var w []float32
		if sw, ok := batch.Sparse[name+"_weights"]; ok {
			w = sw.Values.Data().([]float32)
		}
		if s.Values.Shape().TotalSize() == 0 {
			return nil, nil
		}
		for e, idx := range s.Indices {
			if idx[0] == r {
				ids = append(ids, int(s.Values.Data().([]int64)[e]))
				if w != nil {
					ws = append(ws, float64(w[e]))
				} else {
					ws = append(ws, 1)
				}
			}
		}
		return ids, ws
	}
	denseRow := func(name string, r int) []float64 {
		d := batch.Features[name]
		n := d.Shape().TotalSize() / d.Shape()[0]
		var out []float64
		for _, x := range d.Data().([]float32)[r*n : (r+1)*n] {
			out = append(out, float64(x))
		}
		return out
	}
	// combine is a bag through a table of dim columns.
	combine := func(table []float64, dim int, ids []int, ws []float64, c layers.Combiner) []float64 {
		out := make([]float64, dim)
		var den float64
		for i, id := range ids {
			for j := range dim {
				out[j] += ws[i] * table[id*dim+j]
			}
			if c == layers.CombineSqrtN {
				den += ws[i] * ws[i]
			} else {
				den += ws[i]
			}
		}
		if c == layers.CombineSqrtN {
			den = math.Sqrt(den)
		}
		if c != layers.CombineSum && den != 0 {
			for j := range out {
				out[j] /= den
			}
		}
		return out
	}
	matVec := func(x []float64, w []float64, units int) []float64 {
		out := make([]float64, units)
		for i, xi := range x {
			for u := range units {
				out[u] += xi * w[i*units+u]
			}
		}
		return out
	}
	var wantIn, wantLogits [][]float64
	for r := range exs {
		// The blocks in the order of the columns' names.
		var row []float64
		row = append(row, denseRow("age_bucketized_indicator", r)...)
		ids, ws := bagOf("city", r)
		row = append(row, combine(vals["input_layer/city_embedding/embedding_weights"], 3, ids, ws, layers.CombineMean)...)
		row = append(row, denseRow("city_indicator", r)...)
		for _, k := range []string{"p", "q"} {
			ids, ws = bagOf(k, r)
			row = append(row, combine(vals["input_layer/p_q_shared_embedding/embedding_weights"], 2, ids, ws, layers.CombineSum)...)
		}
		ids, ws = bagOf("tag_weighted_by_tag_w", r)
		row = append(row, combine(vals["input_layer/tag_weighted_by_tag_w_embedding/embedding_weights"], 2, ids, ws, layers.CombineSqrtN)...)
		row = append(row, denseRow("x", r)...)
		wantIn = append(wantIn, row)

		logit := slices.Clone(vals["linear_model/bias_weights"])
		addTo := func(v []float64) {
			for u := range logit {
				logit[u] += v[u]
			}
		}
		addTo(matVec(denseRow("x", r), vals["linear_model/x/weights"], 2))
		addTo(matVec(denseRow("city_indicator", r), vals["linear_model/city_indicator/weights"], 2))
		for _, k := range []string{"age_bucketized", "city", "tag_weighted_by_tag_w", "city_X_z"} {
			ids, ws := bagOf(k, r)
			addTo(combine(vals["linear_model/"+k+"/weights"], 2, ids, ws, layers.CombineSum))
		}
		wantLogits = append(wantLogits, logit)
	}
	approx := cmpopts.EquateApprox(0, 1e-5)
	if diff := cmp.Diff(wantIn, got("input"), approx); diff != "" {
		t.Errorf("input layer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLogits, got("logits"), approx); diff != "" {
		t.Errorf("linear logits (-want +got):\n%s", diff)
	}
}

func TestModelErrors(t *testing.T) {
	s := towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{Seed: 1}), nil)
	x := G.NewMatrix(s.Graph(), tensor.Float32, G.WithShape(4, 3), G.WithName("x"))
	f := model.Features{"x": x}
	for _, tc := range []struct {
		name string
		fn   func() error
		says string
	}{
		{"categorical in the input layer", func() error { _, err := InputLayer(s, f, Identity("i", 3)); return err }, `categorical column "i" is not dense: wrap it in Indicator or Embedding`},
		{"unfitted", func() error { _, err := InputLayer(s, f, Numeric("x", Standardize())); return err }, `column "x" is not fitted: pass the Transformer's Columns(), or Transformer.Fitted of it`},
		{"feature not in the batch", func() error { _, err := InputLayer(s, f, Numeric("y")); return err }, `feature "y" is not in the batch`},
		{"shape not the column's", func() error { _, err := InputLayer(s, f, Numeric("x", Shape(2))); return err }, `feature "x" has shape (4, 3), want [batch, 2]`},
		{"no sparse feature", func() error { _, err := InputLayer(s, f, Embedding(Identity("i", 3), 2)); return err }, `sparse feature "i" is not in the batch`},
		{"no columns", func() error { _, err := InputLayer(s, f); return err }, "no columns"},
		{"two of one name", func() error { _, err := InputLayer(s, f, Numeric("x", Shape(3)), Numeric("x", Shape(3))); return err }, `two columns named "x"`},
		{"units", func() error { _, err := LinearLogits(s, f, 0, Numeric("x", Shape(3))); return err }, "0 units"},
		{"linear, no sparse feature", func() error { _, err := LinearLogits(s, f, 1, HashBucket("h", 3)); return err }, `column "h"`},
		{"embedding of a nil column", func() error { _, err := InputLayer(s, f, Embedding((*VocabularyColumn)(nil), 2)); return err }, "embedding column of a nil categorical column"},
		{"linear, indicator of a nil column", func() error { _, err := LinearLogits(s, f, 1, Indicator((*HashBucketColumn)(nil))); return err }, "indicator column of a nil categorical column"},
		{"invalid column", func() error { _, err := InputLayer(s, f, Embedding(Identity("i", 3), 0)); return err }, "dimension 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.fn()
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
}

// TestLinearWeightsAreLookedUp: a categorical column's linear weights
// and an embedding column's table are read by registered lookups (their
// gradients are sparse), the dense columns' weights are not.
func TestLinearWeightsAreLookedUp(t *testing.T) {
	s := towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{Seed: 1}), nil)
	for _, name := range []string{"c", "d"} {
		if err := scopes.AddSparseFeature(s, scopes.NewSparseFeature(name, tensor.Int64, []int{4, 2}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	x := G.NewMatrix(s.Graph(), tensor.Float32, G.WithShape(4, 1), G.WithName("x"))
	f := model.Features{"x": x}
	if _, err := LinearLogits(s, f, 3, Numeric("x"), Identity("c", 5), Embedding(Identity("d", 6), 2)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range scopes.Lookups(s) {
		got = append(got, l.Variable)
	}
	slices.Sort(got)
	want := []string{"linear_model/c/weights", "linear_model/d_embedding/embedding_weights"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("variables read by lookups (-want +got):\n%s", diff)
	}
}

// TestLinearAndInputLayerTables: one embedding column read by both
// LinearLogits and InputLayer (the wide and the deep part of one model)
// has a table in each, as TensorFlow's linear_model and input_layer make
// their own, so that each part's optimizer trains its own.
func TestLinearAndInputLayerTables(t *testing.T) {
	s := towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{Seed: 1}), nil)
	if err := scopes.AddSparseFeature(s, scopes.NewSparseFeature("d", tensor.Int64, []int{4, 2}, nil)); err != nil {
		t.Fatal(err)
	}
	e := Embedding(Identity("d", 6), 2)
	if _, err := LinearLogits(s, model.Features{}, 1, e); err != nil {
		t.Fatal(err)
	}
	linear := s.VariableNames()
	if _, err := InputLayer(s, model.Features{}, e); err != nil {
		t.Fatal(err)
	}
	deep := s.VariableNames()[len(linear):]
	want := [][]string{
		{"linear_model/d_embedding/embedding_weights", "linear_model/d_embedding/weights", "linear_model/bias_weights"},
		{"input_layer/d_embedding/embedding_weights"},
	}
	if diff := cmp.Diff(want, [][]string{linear, deep}); diff != "" {
		t.Errorf("variables of LinearLogits, then of InputLayer (-want +got):\n%s", diff)
	}
}
