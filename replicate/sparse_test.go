package replicate_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/vartest"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// sparseSGD is plain SGD that applies dense gradients and
// towers.IndexedSlices (each row subtracted at its id, in order): the
// optimizer of these tests, independent of package optimizers. record,
// when set, sees a copy of every Apply's gradients.
type sparseSGD struct {
	lr     float64
	record *[][]any
}

func (o *sparseSGD) Name() string               { return "SparseSGD" }
func (o *sparseSGD) Config() string             { return fmt.Sprintf("SparseSGD(lr=%g)", o.lr) }
func (o *sparseSGD) LearningRate(int64) float64 { return o.lr }
func (o *sparseSGD) Apply(_ *towers.Store, vars []*towers.Variable, grads []any) error {
	if o.record != nil {
		var cp []any
		for _, g := range grads {
			switch g := g.(type) {
			case towers.IndexedSlices:
				vals, err := numeric.SliceFloat64s(g.Values)
				if err != nil {
					return err
				}
				cp = append(cp, towers.IndexedSlices{Indices: slices.Clone(g.Indices), Values: vals, DenseShape: g.DenseShape})
			case []float64:
				cp = append(cp, slices.Clone(g))
			default:
				cp = append(cp, g)
			}
		}
		*o.record = append(*o.record, cp)
	}
	for i, v := range vars {
		var err error
		switch w := v.Data().(type) {
		case []float64:
			err = sgdStep(v, w, grads[i], o.lr)
		case []float32:
			err = sgdStep(v, w, grads[i], o.lr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func sgdStep[T float32 | float64](v *towers.Variable, w []T, grad any, lr float64) error {
	switch g := grad.(type) {
	case towers.IndexedSlices:
		if err := g.CheckFor(v); err != nil {
			return err
		}
		rs := g.RowSize()
		vals, _ := g.Values.([]T)
		for k, id := range g.Indices {
			for j := range rs {
				w[id*rs+j] -= T(lr) * vals[k*rs+j]
			}
		}
	case []T:
		for j := range w {
			w[j] -= T(lr) * g[j]
		}
	default:
		return fmt.Errorf("sparseSGD: gradient of %q is a %T", v.Name(), grad)
	}
	return nil
}

func ints(shape []int, vals ...int64) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals))
}

// bag is a sparse feature of rows rows whose row r holds the ids
// bags[r] (at positions 0, 1, …), int64 values.
func bag(width int, bags ...[]int64) sharding.SparseCOO {
	var idx [][]int
	var vals []int64
	for r, b := range bags {
		for k, id := range b {
			idx = append(idx, []int{r, k})
			vals = append(vals, id)
		}
	}
	return sharding.SparseCOO{Indices: idx, Values: tensor.New(tensor.WithShape(len(vals)), tensor.WithBacking(vals)), DenseShape: []int{len(bags), width}}
}

// bagWeights is a float64 sparse feature with bag's indices.
func bagWeights(width int, ws ...[]float64) sharding.SparseCOO {
	var idx [][]int
	var vals []float64
	for r, b := range ws {
		for k, w := range b {
			idx = append(idx, []int{r, k})
			vals = append(vals, w)
		}
	}
	return sharding.SparseCOO{Indices: idx, Values: tensor.New(tensor.WithShape(len(vals)), tensor.WithBacking(vals)), DenseShape: []int{len(ws), width}}
}

// testBags are 7 rows of bags over a vocabulary of 6, with repeats within
// and across rows and an empty row; testWeights weigh them.
var (
	testBags    = [][]int64{{1, 3}, {}, {3, 3, 5}, {0}, {2, 4, 1}, {5, 1}, {4}}
	testWeights = [][]float64{{0.5, 2}, {}, {1, 1.5, -0.25}, {3}, {0.2, 0.7, 1.1}, {2, 2}, {0.3}}
)

// lookupCase is one way of looking up embeddings in lookupModel.
type lookupCase struct {
	name     string
	sparse   bool
	combiner layers.Combiner
	weighted bool
	padded   bool
	ids      *tensor.Dense // dense ids; nil for the sparse bags
	tied     bool          // the loss also reads the table densely
	f32      bool          // a float32 table
	shared   bool          // the table is also looked up by the dense ids "ids"
}

// lookupModel looks up params["case"] in a table of vocab 6 × dim 3
// (initialised from params["table"] when given) and predicts the lookup's
// output; its loss is the mean of the output's squares (or, with
// params["linear"], its mean).
func lookupModel(s *towers.Scope, mode model.Mode, f model.Features, _ model.Labels, p model.Params) (*model.Spec, error) {
	c := p["case"].(lookupCase)
	cfg := layers.EmbeddingConfig{Vocab: 6, Dim: 3, Dtype: tensor.Float64, Padded: c.padded, PaddingID: 3}
	if t, ok := p["table"].(*tensor.Dense); ok {
		if c.f32 {
			vals, _ := numeric.SliceFloat64s(t.Data())
			f := make([]float32, len(vals))
			for i, x := range vals {
				f[i] = float32(x)
			}
			t = tensor.New(tensor.WithShape(t.Shape()...), tensor.WithBacking(f))
			cfg.Dtype = tensor.Float32
		}
		cfg.Init = towers.Values(t)
	}
	emb, err := layers.NewEmbedding(layers.NewModule(s, ""), "emb", cfg)
	if err != nil {
		return nil, err
	}
	var out *G.Node
	if c.sparse {
		ids, err := s.SparseFeature("bag")
		if err != nil {
			return nil, err
		}
		var opts []layers.LookupOption
		if c.weighted {
			w, err := s.SparseFeature("w")
			if err != nil {
				return nil, err
			}
			opts = append(opts, layers.IDWeights(w))
		}
		if out, err = emb.LookupSparse(ids, c.combiner, opts...); err != nil {
			return nil, err
		}
	} else if out, err = emb.Lookup(f.Get("ids")); err != nil {
		return nil, err
	}
	loss := G.Must(G.Mean(G.Must(G.Square(out))))
	if p["linear"] == true {
		loss = G.Must(G.Mean(out))
	}
	if c.shared {
		out2, err := emb.Lookup(f.Get("ids"))
		if err != nil {
			return nil, err
		}
		loss = G.Must(G.Add(loss, G.Must(G.Mean(G.Must(G.Square(out2))))))
	}
	if c.tied {
		pen := G.Must(G.Mul(G.Must(G.Sum(G.Must(G.Square(emb.Table())))), G.NewConstant(0.01)))
		loss = G.Must(G.Add(loss, pen))
	}
	return &model.Spec{Loss: loss, Predictions: map[string]*G.Node{"out": out}}, nil
}

// lookupBatch is the batch of a lookup case: 7 rows.
func lookupBatch(c lookupCase) sharding.Batch {
	b := sharding.Batch{Features: map[string]*tensor.Dense{}, Labels: map[string]*tensor.Dense{"y": column(0, 0, 0, 0, 0, 0, 0)}}
	if c.sparse {
		b.Sparse = map[string]sharding.SparseCOO{"bag": bag(3, testBags...)}
		if c.weighted {
			b.Sparse["w"] = bagWeights(3, testWeights...)
		}
	} else {
		b.Features["ids"] = c.ids
	}
	if c.shared {
		b.Features["ids"] = ints([]int{7, 2}, 1, 3, 3, 3, 0, 5, 2, 4, 5, 5, 0, 1, 4, 2)
	}
	return b
}

var lookupCases = []lookupCase{
	{name: "ids [batch]", ids: ints([]int{7}, 1, 3, 3, 0, 5, 2, 3)},
	{name: "ids [batch, k]", ids: ints([]int{7, 2}, 1, 3, 3, 3, 0, 5, 2, 4, 5, 5, 0, 1, 4, 2)},
	{name: "ids [batch, k] padded", padded: true, ids: ints([]int{7, 2}, 1, 3, 3, 3, 0, 5, 2, 4, 5, 5, 0, 1, 4, 2)},
	{name: "sparse sum", sparse: true, combiner: layers.CombineSum},
	{name: "sparse mean", sparse: true, combiner: layers.CombineMean},
	{name: "sparse sqrtn", sparse: true, combiner: layers.CombineSqrtN},
	{name: "sparse weighted sum", sparse: true, combiner: layers.CombineSum, weighted: true},
	{name: "sparse weighted mean", sparse: true, combiner: layers.CombineMean, weighted: true},
	{name: "sparse weighted sqrtn padded", sparse: true, combiner: layers.CombineSqrtN, weighted: true, padded: true},
	{name: "sparse mean tied", sparse: true, combiner: layers.CombineMean, tied: true},
	{name: "ids [batch, k] tied", tied: true, ids: ints([]int{7, 2}, 1, 3, 3, 3, 0, 5, 2, 4, 5, 5, 0, 1, 4, 2)},
	{name: "one table, two features: sparse mean and ids", sparse: true, combiner: layers.CombineMean, shared: true},
	{name: "int32 ids", ids: tensor.New(tensor.WithShape(7), tensor.WithBacking([]int32{5, 4, 3, 2, 1, 0, 0}))},
	{name: "int ids", ids: tensor.New(tensor.WithShape(7), tensor.WithBacking([]int{0, 1, 5, 2, 2, 4, 3}))},
}

// float32Cases are lookup cases on a float32 table.
var float32Cases = []lookupCase{
	{name: "float32 ids [batch, k] padded", f32: true, padded: true, ids: ints([]int{7, 2}, 1, 3, 3, 3, 0, 5, 2, 4, 5, 5, 0, 1, 4, 2)},
	{name: "float32 sparse weighted sqrtn", f32: true, sparse: true, combiner: layers.CombineSqrtN, weighted: true},
}

// testTable is a 6 × 3 table with distinct entries.
func testTable() *tensor.Dense {
	v := make([]float64, 18)
	for i := range v {
		v[i] = 0.1*float64(i) - 0.7 + 0.013*float64(i*i)
	}
	return tensor.New(tensor.WithShape(6, 3), tensor.WithBacking(v))
}

// lookupRef is what a lookup case computes, by plain loops: per output
// row its (weighted, combined) embedding, and per output row the ids and
// scales its gradient maps to (padding included: the caller leaves it).
// A padded case's table has its padding row 3 zero, as NewEmbedding makes
// it.
func lookupRef(c lookupCase, table []float64) (out [][]float64, ids [][]int, scales [][]float64) {
	const dim = 3
	if c.padded { // NewEmbedding zeroes the padding row
		table = slices.Clone(table)
		clear(table[3*dim : 4*dim])
	}
	if !c.sparse {
		raw, _ := numeric.SliceFloat64s(c.ids.Data())
		for _, x := range raw {
			id := int(x)
			out = append(out, slices.Clone(table[id*dim:(id+1)*dim]))
			ids = append(ids, []int{int(id)})
			scales = append(scales, []float64{1})
		}
		return out, ids, scales
	}
	for r, b := range testBags {
		row := make([]float64, dim)
		var sw, sw2 float64
		var rIDs []int
		var ws []float64
		for k, id := range b {
			w := 1.0
			if c.weighted {
				w = testWeights[r][k]
			}
			sw += w
			sw2 += w * w
			rIDs = append(rIDs, int(id))
			ws = append(ws, w)
		}
		den := 1.0
		switch {
		case c.combiner == layers.CombineMean && sw != 0:
			den = sw
		case c.combiner == layers.CombineSqrtN && sw2 != 0:
			den = math.Sqrt(sw2)
		}
		for k, id := range rIDs {
			for j := range dim {
				row[j] += ws[k] / den * table[id*dim+j]
			}
			ws[k] /= den
		}
		out = append(out, row)
		ids = append(ids, rIDs)
		scales = append(scales, ws)
	}
	return out, ids, scales
}

func newLookupEngine(t *testing.T, towersN int, c lookupCase, reduction replicate.LossReduction, extra model.Params, opt *sparseSGD) *replicate.Engine {
	t.Helper()
	p := model.Params{"case": c, "table": testTable()}
	maps.Copy(p, extra)
	if opt == nil {
		opt = &sparseSGD{lr: 0.1}
	}
	e, err := replicate.NewEngine(replicate.ModelFn(lookupModel, replicate.Config{Devices: towers.CPUs(towersN), Reduction: reduction, Optimizer: opt}), replicate.EngineConfig{Seed: 1, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestEmbeddingLookupForward: every lookup case's output, on 1 to 3
// towers, equals the plain loops of lookupRef (ids [batch] → [batch, dim],
// [batch, k] → [batch, k, dim]; sparse bags combined by sum, mean and
// sqrtn, with and without weights; the empty row zeros).
func TestEmbeddingLookupForward(t *testing.T) {
	table := testTable().Data().([]float64)
	for _, c := range append(slices.Clone(lookupCases), float32Cases...) {
		want, _, _ := lookupRef(c, table)
		var flat []float64
		for _, r := range want {
			flat = append(flat, r...)
		}
		wantShape := []int{7, 3}
		if c.ids != nil {
			wantShape = append(c.ids.Shape().Clone(), 3)
		}
		for n := 1; n <= 3; n++ {
			t.Run(fmt.Sprintf("%s/towers%d", c.name, n), func(t *testing.T) {
				e := newLookupEngine(t, n, c, replicate.BatchMean, nil, nil)
				out, err := e.PredictStep(context.Background(), lookupBatch(c))
				if err != nil {
					t.Fatal(err)
				}
				got := out.Predictions["out"]
				if diff := cmp.Diff(wantShape, []int(got.Shape())); diff != "" {
					t.Errorf("shape (-want +got):\n%s", diff)
				}
				tol := 1e-14
				if c.f32 {
					tol = 1e-6
				}
				gotVals, err := numeric.SliceFloat64s(got.Data())
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(flat, gotVals, cmpopts.EquateApprox(0, tol)); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestEmbeddingGradientIsNumeric: the table's gradient handed to the
// optimizer is a towers.IndexedSlices (never a dense buffer), and densified
// it equals the central-difference gradient of the loss; the padding id's
// row gets none. A table the loss also reads densely (tied) gets one dense
// gradient, the rows added into it: the numeric gradient too.
func TestEmbeddingGradientIsNumeric(t *testing.T) {
	ctx := context.Background()
	for _, c := range lookupCases {
		t.Run(c.name, func(t *testing.T) {
			e := newLookupEngine(t, 1, c, replicate.BatchMean, nil, nil)
			b := lookupBatch(c)
			_, grads, err := e.ComputeGradients(ctx, b, replicate.StepHooks{})
			if err != nil {
				t.Fatal(err)
			}
			if len(grads) != 1 {
				t.Fatalf("%d gradients, want the table's", len(grads))
			}
			got := make([]float64, 18)
			switch g := grads[0].Value.(type) {
			case towers.IndexedSlices:
				if c.tied {
					t.Fatalf("gradient of a table also read densely is an IndexedSlices, want the dense sum")
				}
				if c.padded && slices.Contains(g.Indices, 3) {
					t.Errorf("padding id 3 has a gradient row: ids %v", g.Indices)
				}
				if err := g.AddTo(got); err != nil {
					t.Fatal(err)
				}
			case []float64:
				if !c.tied {
					t.Fatalf("gradient of %s is dense, want towers.IndexedSlices", grads[0].Variable.Name())
				}
				copy(got, g)
			default:
				t.Fatalf("gradient of %s is a %T", grads[0].Variable.Name(), g)
			}
			w := grads[0].Variable.Data().([]float64)
			want := make([]float64, 18)
			const h = 1e-6
			for i := range w {
				if c.padded && i/3 == 3 {
					continue // no gradient, by definition
				}
				old := w[i]
				w[i] = old + h
				lp, _, err := e.ComputeGradients(ctx, b, replicate.StepHooks{})
				if err != nil {
					t.Fatal(err)
				}
				w[i] = old - h
				lm, _, err := e.ComputeGradients(ctx, b, replicate.StepHooks{})
				if err != nil {
					t.Fatal(err)
				}
				w[i] = old
				want[i] = (lp - lm) / (2 * h)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-8)); diff != "" {
				t.Errorf("gradient (-numeric +sparse):\n%s", diff)
			}
		})
	}
}

// TestIndexedSlicesSumOverTowers: TensorFlow's IndexedSlices semantics.
// With a loss linear in the lookup's output (its mean), each tower's
// gradient rows are its ids' scales over its output's size; the optimizer
// gets the towers' rows weighted by their loss weights (SUM 1, MEAN 1/n,
// BatchMean rows/total) and duplicates summed, ids ascending, on 1 to 3
// towers.
func TestIndexedSlicesSumOverTowers(t *testing.T) {
	c64 := lookupCase{name: "weighted mean", sparse: true, combiner: layers.CombineMean, weighted: true}
	_, ids, scales := lookupRef(c64, testTable().Data().([]float64))
	for _, c := range []lookupCase{c64, {name: "float32 weighted mean", sparse: true, combiner: layers.CombineMean, weighted: true, f32: true}} {
		tol := 1e-14
		if c.f32 {
			tol = 1e-7
		}
		for _, red := range []replicate.LossReduction{replicate.Sum, replicate.Mean, replicate.BatchMean} {
			for n := 1; n <= 3; n++ {
				t.Run(fmt.Sprintf("%s/%v/towers%d", c.name, red, n), func(t *testing.T) {
					sizes, err := sharding.Sizes(7, n)
					if err != nil {
						t.Fatal(err)
					}
					rows := map[int][]float64{}
					r := 0
					for _, size := range sizes {
						w := map[replicate.LossReduction]float64{replicate.Sum: 1, replicate.Mean: 1 / float64(n), replicate.BatchMean: float64(size) / 7}[red]
						for range size {
							for k, id := range ids[r] {
								if rows[id] == nil {
									rows[id] = make([]float64, 3)
								}
								for j := range 3 {
									rows[id][j] += w * scales[r][k] / float64(size*3)
								}
							}
							r++
						}
					}
					want := towers.IndexedSlices{DenseShape: []int{6, 3}, Values: []float64{}}
					for _, id := range slices.Sorted(maps.Keys(rows)) {
						want.Indices = append(want.Indices, id)
						want.Values = append(want.Values.([]float64), rows[id]...)
					}
					var rec [][]any
					e := newLookupEngine(t, n, c, red, model.Params{"linear": true}, &sparseSGD{lr: 0.1, record: &rec})
					if _, err := e.TrainStep(context.Background(), lookupBatch(c), replicate.StepHooks{}); err != nil {
						t.Fatal(err)
					}
					if len(rec) != 1 || len(rec[0]) != 1 {
						t.Fatalf("optimizer saw %v, want one apply of one gradient", rec)
					}
					if diff := cmp.Diff(want, rec[0][0], cmpopts.EquateApprox(0, tol)); diff != "" {
						t.Errorf("gradient (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// embedModel: a sparse bag (mean of a 20 × 4 table), dense ids (a padded
// 10 × 2 table, two per row) and a dense feature, concatenated into a
// hidden ReLU layer and a linear output; squared error. With
// params["tied"] the bag's table is also read densely (a penalty on its
// squares), so its gradient is the dense one plus the rows; params["parts"]
// splits it into that many partitions.
func embedModel(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
	m := layers.NewModule(s, "")
	parts, _ := p["parts"].(int)
	bags, err := layers.NewEmbedding(m, "bag", layers.EmbeddingConfig{Vocab: 20, Dim: 4, Dtype: tensor.Float64, Partitions: parts})
	if err != nil {
		return nil, err
	}
	idEmb, err := layers.NewEmbedding(m, "id", layers.EmbeddingConfig{Vocab: 10, Dim: 2, Dtype: tensor.Float64, Padded: true, PaddingID: 0})
	if err != nil {
		return nil, err
	}
	sf, err := s.SparseFeature("bag")
	if err != nil {
		return nil, err
	}
	e1, err := bags.LookupSparse(sf, layers.CombineMean)
	if err != nil {
		return nil, err
	}
	e2, err := idEmb.Lookup(f.Get("ids"))
	if err != nil {
		return nil, err
	}
	rows := e1.Shape()[0]
	e2 = G.Must(G.Reshape(e2, tensor.Shape{rows, 4}))
	h := G.Must(G.Concat(1, f.Get("x"), e1, e2))
	hidden, err := layers.NewDense(m, "hidden", layers.DenseConfig{In: 11, Units: 5, Activation: layers.ReLU, Dtype: tensor.Float64})
	if err != nil {
		return nil, err
	}
	outL, err := layers.NewDense(m, "out", layers.DenseConfig{In: 5, Units: 1, Dtype: tensor.Float64})
	if err != nil {
		return nil, err
	}
	z, err := hidden.Apply(h)
	if err != nil {
		return nil, err
	}
	pred, err := outL.Apply(z)
	if err != nil {
		return nil, err
	}
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, l.Get("y")))))))
	if p["tied"] == true {
		pen := G.Must(G.Mul(G.Must(G.Sum(G.Must(G.Square(bags.Table())))), G.NewConstant(0.01)))
		loss = G.Must(G.Add(loss, pen))
	}
	return &model.Spec{Loss: loss, Predictions: map[string]*G.Node{"p": pred}}, nil
}

// embedBatch is batch i of 9 rows for embedModel.
func embedBatch(i int) sharding.Batch {
	var bags [][]int64
	var ids []int64
	var x, y []float64
	for r := range 9 {
		k := (r + i) % 4 // 0 to 3 ids, repeating
		var b []int64
		for j := range k {
			b = append(b, int64((r*7+j*3+i*5)%20)%int64(5+j*5))
		}
		bags = append(bags, b)
		ids = append(ids, int64((r+i)%10), int64((r*3+i)%10))
		x = append(x, float64(r)/9, float64(i)/3-0.5, float64((r*i)%5)/5)
		y = append(y, math.Sin(float64(r+i)))
	}
	return sharding.Batch{
		Features: map[string]*tensor.Dense{
			"x":   tensor.New(tensor.WithShape(9, 3), tensor.WithBacking(x)),
			"ids": ints([]int{9, 2}, ids...),
		},
		Labels: map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(9, 1), tensor.WithBacking(y))},
		Sparse: map[string]sharding.SparseCOO{"bag": bag(3, bags...)},
	}
}

// TestEmbeddingTowersEqualOneDevice: a model with two embedding tables
// (one sparse bag, one by dense ids with padding) and dense layers trains
// on 2 to 4 towers as on one device: every variable after 4 steps of
// sparseSGD within 1e-12 (float64; the sums' order differs), with the bag
// table read only sparsely and also densely (tied).
func TestEmbeddingTowersEqualOneDevice(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, n int, tied bool) map[string][]float64 {
		e, err := replicate.NewEngine(replicate.ModelFn(embedModel, replicate.Config{Devices: towers.CPUs(n), Optimizer: &sparseSGD{lr: 0.2}}),
			replicate.EngineConfig{Seed: 7, Params: model.Params{"tied": tied}})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		for i := range 4 {
			if _, err := e.TrainStep(ctx, embedBatch(i), replicate.StepHooks{}); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		out := map[string][]float64{}
		for _, name := range e.Store().Names() {
			v, _ := e.Store().Lookup(name)
			if d, ok := v.Data().([]float64); ok {
				out[name] = slices.Clone(d)
			}
		}
		return out
	}
	for _, tied := range []bool{false, true} {
		one := run(t, 1, tied)
		init, err := replicate.NewEngine(replicate.ModelFn(embedModel, replicate.Config{Devices: towers.CPUs(1), Optimizer: &sparseSGD{lr: 0.2}}),
			replicate.EngineConfig{Seed: 7, Params: model.Params{"tied": tied}})
		if err != nil {
			t.Fatal(err)
		}
		if err := init.Build(model.Train, embedBatch(0)); err != nil {
			t.Fatal(err)
		}
		v, _ := init.Store().Lookup("bag/embeddings")
		if cmp.Equal(one["bag/embeddings"], v.Data().([]float64)) {
			t.Fatalf("tied=%v: training left the bag table as it was", tied)
		}
		init.Close()
		for n := 2; n <= 4; n++ {
			t.Run(fmt.Sprintf("tied=%v/towers%d", tied, n), func(t *testing.T) {
				if diff := cmp.Diff(one, run(t, n, tied), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
					t.Errorf("variables (-1 device +%d towers):\n%s", n, diff)
				}
			})
		}
	}
}

// TestEmbeddingIDOutOfRange: an id outside the table is the step's
// error, naming the feature, the batch's row and the id, on any tower;
// negative ids too.
func TestEmbeddingIDOutOfRange(t *testing.T) {
	badBags := slices.Clone(testBags)
	badBags[5] = []int64{5, 9}
	negBags := slices.Clone(testBags)
	negBags[2] = []int64{-1}
	tests := []struct {
		name  string
		c     lookupCase
		batch sharding.Batch
		want  []string
	}{
		{"sparse", lookupCase{sparse: true}, sharding.Batch{Sparse: map[string]sharding.SparseCOO{"bag": bag(3, badBags...)}}, []string{`sparse feature "bag"`, "row 5", "id 9"}},
		{"sparse negative", lookupCase{sparse: true}, sharding.Batch{Sparse: map[string]sharding.SparseCOO{"bag": bag(3, negBags...)}}, []string{`sparse feature "bag"`, "row 2", "id -1"}},
		{"dense ids", lookupCase{ids: ints([]int{7}, 0, 0, 0, 0, 0, 0, 0)}, sharding.Batch{Features: map[string]*tensor.Dense{"ids": ints([]int{7}, 0, 1, 2, 3, 4, 6, 1)}}, []string{"features/ids", "row 5", "id 6"}},
	}
	for _, tt := range tests {
		for n := 1; n <= 3; n++ {
			t.Run(fmt.Sprintf("%s/towers%d", tt.name, n), func(t *testing.T) {
				e := newLookupEngine(t, n, tt.c, replicate.BatchMean, nil, nil)
				_, err := e.TrainStep(context.Background(), tt.batch, replicate.StepHooks{})
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
			})
		}
	}
}

// TestSparseFeatureReachesModel: each tower's model function gets its
// shard of a sparse feature as a towers.SparseFeature (dense shape [shard
// rows, 3]) whose Dense node is features[name]; a sparse feature the model
// never densifies is never densified: one of strings with a repeated index,
// which cannot be densified, trains.
func TestSparseFeatureReachesModel(t *testing.T) {
	for n := 1; n <= 3; n++ {
		t.Run(fmt.Sprintf("towers%d", n), func(t *testing.T) {
			var shapes [][]int
			var sameNode []bool
			fn := func(s *towers.Scope, mode model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
				sf, err := s.SparseFeature("bag")
				if err != nil {
					return nil, err
				}
				if _, err := s.SparseFeature("nope"); err == nil || !strings.Contains(err.Error(), `"bag" "tags"`) {
					return nil, fmt.Errorf("missing sparse feature: error %v does not name those there are", err)
				}
				shapes = append(shapes, sf.DenseShape())
				sameNode = append(sameNode, f["bag"] == sf.Dense() && f["bag"] != nil)
				return lookupModel(s, mode, f, l, p)
			}
			tags := sharding.SparseCOO{
				Indices:    [][]int{{0, 0}, {0, 0}, {6, 1}},
				Values:     tensor.New(tensor.WithShape(3), tensor.WithBacking([]string{"a", "b", "c"})),
				DenseShape: []int{7, 2},
			}
			c := lookupCase{sparse: true, combiner: layers.CombineSum}
			b := lookupBatch(c)
			b.Sparse["tags"] = tags
			e, err := replicate.NewEngine(replicate.ModelFn(fn, replicate.Config{Devices: towers.CPUs(n), Optimizer: &sparseSGD{lr: 0.1}}),
				replicate.EngineConfig{Seed: 1, Params: model.Params{"case": c}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if _, err := e.TrainStep(context.Background(), b, replicate.StepHooks{}); err != nil {
				t.Fatal(err)
			}
			sizes, _ := sharding.Sizes(7, n)
			var want [][]int
			for _, s := range sizes {
				want = append(want, []int{s, 3})
			}
			if diff := cmp.Diff(want, shapes); diff != "" {
				t.Errorf("dense shapes per tower (-want +got):\n%s", diff)
			}
			if slices.Contains(sameNode, false) {
				t.Errorf("features[\"bag\"] is SparseFeature(\"bag\").Dense() per tower: %v", sameNode)
			}
		})
	}
}

// bigTableModel looks up a sparse bag in a table of 1M × 8 float64
// (64 MiB) and minimizes the mean of the output's squares.
func bigTableModel(s *towers.Scope, mode model.Mode, f model.Features, _ model.Labels, _ model.Params) (*model.Spec, error) {
	emb, err := layers.NewEmbedding(layers.NewModule(s, ""), "big", layers.EmbeddingConfig{Vocab: 1 << 20, Dim: 8, Dtype: tensor.Float64, Init: towers.Zeros()})
	if err != nil {
		return nil, err
	}
	sf, err := s.SparseFeature("bag")
	if err != nil {
		return nil, err
	}
	out, err := emb.LookupSparse(sf, layers.CombineSum)
	if err != nil {
		return nil, err
	}
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Add(out, G.NewConstant(1.0)))))))
	return &model.Spec{Loss: loss, Predictions: map[string]*G.Node{"out": out}}, nil
}

// TestNoTableSizedBufferPerStep: a training step on 1 and 3 towers
// allocates far less than the table (64 MiB): no tower, sum or update
// makes a dense gradient of it. The steps after the first are measured
// (the first builds the towers).
func TestNoTableSizedBufferPerStep(t *testing.T) {
	const tableBytes = (1 << 20) * 8 * 8
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("towers%d", n), func(t *testing.T) {
			e, err := replicate.NewEngine(replicate.ModelFn(bigTableModel, replicate.Config{Devices: towers.CPUs(n), Optimizer: &sparseSGD{lr: 0.1}}), replicate.EngineConfig{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			b := sharding.Batch{Sparse: map[string]sharding.SparseCOO{"bag": bag(3, []int64{1, 1 << 19}, []int64{7}, []int64{(1 << 20) - 1, 3, 3}, []int64{5})}}
			ctx := context.Background()
			if _, err := e.TrainStep(ctx, b, replicate.StepHooks{}); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const steps = 3
			for range steps {
				if _, err := e.TrainStep(ctx, b, replicate.StepHooks{}); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			per := (after.TotalAlloc - before.TotalAlloc) / steps
			t.Logf("%d towers: %d bytes allocated per step, table %d bytes", n, per, tableBytes)
			if per > tableBytes/16 {
				t.Errorf("a step allocated %d bytes, the table has %d: a dense buffer of the table per step", per, tableBytes)
			}
			v, _ := e.Store().Lookup("big/embeddings")
			if w := v.Data().([]float64); w[7*8] == 0 || w[(1<<19)*8] == 0 {
				t.Errorf("rows 7 and 2^19 untrained: %v, %v", w[7*8], w[(1<<19)*8])
			}
		})
	}
}

// TestSparseGradientsAsValues: computing an embedding model's gradients
// and applying them equals a training step, bit for bit, on 1 and 3
// towers: through the engine (the table's gradient a
// towers.IndexedSlices) and through the Estimator, by name (the table's
// rows in Gradients.Sparse) and flat (the rows added into Gradients.Flat).
func TestSparseGradientsAsValues(t *testing.T) {
	ctx := context.Background()
	batches := []sharding.Batch{embedBatch(0), embedBatch(1), embedBatch(2)}
	for n := 1; n <= 3; n += 2 {
		t.Run(fmt.Sprintf("engine/towers%d", n), func(t *testing.T) {
			newEngine := func() *replicate.Engine {
				e, err := replicate.NewEngine(replicate.ModelFn(embedModel, replicate.Config{Devices: towers.CPUs(n), Optimizer: &sparseSGD{lr: 0.2}}), replicate.EngineConfig{Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { e.Close() })
				return e
			}
			trained, stepped := newEngine(), newEngine()
			for i, b := range batches {
				if _, err := trained.TrainStep(ctx, b, replicate.StepHooks{}); err != nil {
					t.Fatal(err)
				}
				_, grads, err := stepped.ComputeGradients(ctx, b, replicate.StepHooks{})
				if err != nil {
					t.Fatal(err)
				}
				sparse := 0
				for _, g := range grads {
					if _, ok := g.Value.(towers.IndexedSlices); ok {
						sparse++
					}
				}
				if sparse != 2 {
					t.Fatalf("batch %d: %d sparse gradients, want the 2 tables'", i, sparse)
				}
				if err := stepped.ApplyGradients(ctx, grads); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			for _, name := range trained.Store().Names() {
				a, _ := trained.Store().Lookup(name)
				b, _ := stepped.Store().Lookup(name)
				if diff := cmp.Diff(a.Data(), b.Data()); diff != "" {
					t.Errorf("%s (-train +compute/apply):\n%s", name, diff)
				}
			}
		})
		for _, flat := range []bool{false, true} {
			t.Run(fmt.Sprintf("estimator/flat=%v/towers%d", flat, n), func(t *testing.T) {
				newEst := func() *estimator.Estimator {
					est, err := estimator.New(replicate.ModelFn(embedModel, replicate.Config{Devices: towers.CPUs(n), Optimizer: &sparseSGD{lr: 0.2}}),
						estimator.RunConfig{Seed: 3, LogEvery: -1})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { est.Close() })
					return est
				}
				trained, stepped := newEst(), newEst()
				if err := trained.Train(ctx, batchesOf(batches)); err != nil {
					t.Fatal(err)
				}
				for i, b := range batches {
					g, err := stepped.ComputeGradients(ctx, b)
					if err != nil {
						t.Fatalf("batch %d: %v", i, err)
					}
					if _, ok := g.Sparse["bag/embeddings"]; !ok {
						t.Fatalf("batch %d: no sparse gradient of bag/embeddings: %v", i, g.Sparse)
					}
					if flat {
						g.ByName, g.Sparse = nil, nil
					}
					if err := stepped.ApplyGradients(ctx, g); err != nil {
						t.Fatalf("batch %d: %v", i, err)
					}
				}
				if diff := cmp.Diff(vartest.Variables(t, trained), vartest.Variables(t, stepped)); diff != "" {
					t.Errorf("variables (-train +compute/apply):\n%s", diff)
				}
			})
		}
	}
}

// TestEmbeddingAccumulateAndClip: with embedding tables (one also read
// densely, tied), 3 micro-batches of 3 rows accumulated into one update
// equal one step on their 9 rows, and clipping by global norm (small
// enough to clip) on 2 and 3 towers equals one device: every variable
// within 1e-12 after 3 updates, with sparseSGD and with the optimizers
// package's Adagrad.
func TestEmbeddingAccumulateAndClip(t *testing.T) {
	ctx := context.Background()
	opts := map[string]func() optimizers.Optimizer{
		"sparseSGD": func() optimizers.Optimizer { return &sparseSGD{lr: 0.2} },
		"adagrad":   func() optimizers.Optimizer { return optimizers.Adagrad(0.1) },
	}
	run := func(t *testing.T, n int, opt string, tied, micro bool, clip model.Clip) map[string][]float64 {
		e, err := replicate.NewEngine(replicate.ModelFn(embedModel, replicate.Config{Devices: towers.CPUs(n), Optimizer: opts[opt](), Clip: clip}),
			replicate.EngineConfig{Seed: 7, Params: model.Params{"tied": tied}})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		for i := range 3 {
			b := embedBatch(i)
			if micro {
				var parts []sharding.Batch
				if parts, _, err = b.Split(3); err != nil {
					t.Fatal(err)
				}
				_, err = e.TrainMicroBatches(ctx, parts, replicate.StepHooks{})
			} else {
				_, err = e.TrainStep(ctx, b, replicate.StepHooks{})
			}
			if err != nil {
				t.Fatalf("update %d: %v", i, err)
			}
		}
		out := map[string][]float64{}
		for _, name := range e.Store().Names() {
			v, _ := e.Store().Lookup(name)
			if d, ok := v.Data().([]float64); ok {
				out[name] = slices.Clone(d)
			}
		}
		return out
	}
	for _, opt := range []string{"sparseSGD", "adagrad"} {
		for _, tied := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tied=%v/accumulate", opt, tied), func(t *testing.T) {
				for _, n := range []int{1, 2} {
					if diff := cmp.Diff(run(t, n, opt, tied, false, model.Clip{}), run(t, n, opt, tied, true, model.Clip{}), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
						t.Errorf("%d towers: variables (-one step +3 micro-batches):\n%s", n, diff)
					}
				}
			})
			t.Run(fmt.Sprintf("%s/tied=%v/clip", opt, tied), func(t *testing.T) {
				clip := model.Clip{GlobalNorm: 0.05}
				one := run(t, 1, opt, tied, false, clip)
				if cmp.Equal(one, run(t, 1, opt, tied, false, model.Clip{}), cmpopts.EquateApprox(0, 1e-12)) {
					t.Fatal("the clip changed nothing: make it smaller")
				}
				for _, n := range []int{2, 3} {
					if diff := cmp.Diff(one, run(t, n, opt, tied, false, clip), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
						t.Errorf("variables (-1 device +%d towers):\n%s", n, diff)
					}
				}
			})
		}
	}
}

// TestEmbeddingShardWithoutIDs: a tower whose shard of a sparse feature
// has no entries (rows with empty bags) gives zeros and no gradient rows:
// on 3 towers (two of them without ids) the table's gradient is one
// device's.
func TestEmbeddingShardWithoutIDs(t *testing.T) {
	b := sharding.Batch{Sparse: map[string]sharding.SparseCOO{"bag": bag(3, []int64{1, 4}, []int64{2}, []int64{}, []int64{})}}
	c := lookupCase{sparse: true, combiner: layers.CombineMean}
	var got []any
	for _, n := range []int{1, 3} {
		var rec [][]any
		e := newLookupEngine(t, n, c, replicate.BatchMean, nil, &sparseSGD{lr: 0.1, record: &rec})
		out, err := e.PredictStep(context.Background(), b)
		if err != nil {
			t.Fatalf("%d towers: %v", n, err)
		}
		if d := out.Predictions["out"].Data().([]float64); !slices.Equal(d[6:], make([]float64, 6)) {
			t.Errorf("%d towers: rows without ids are %v, want zeros", n, d[6:])
		}
		if _, err := e.TrainStep(context.Background(), b, replicate.StepHooks{}); err != nil {
			t.Fatalf("%d towers: %v", n, err)
		}
		got = append(got, rec[0][0])
	}
	if diff := cmp.Diff(got[0], got[1], cmpopts.EquateApprox(0, 1e-14)); diff != "" {
		t.Errorf("gradient (-1 device +3 towers):\n%s", diff)
	}
}
