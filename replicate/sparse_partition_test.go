package replicate_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// partTable is the initial value of partModel's table, 20 × 4 of dtype dt.
func partTable(dt tensor.Dtype) *tensor.Dense {
	v := make([]float64, 80)
	for i := range v {
		v[i] = 0.03*float64(i%17) - 0.25 + 0.001*float64(i)
	}
	if dt == tensor.Float32 {
		f := make([]float32, len(v))
		for i, x := range v {
			f[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(20, 4), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(20, 4), tensor.WithBacking(v))
}

// partModel is embedBatch's model over one table of 20 × 4 (dtype
// params["dtype"], split into params["parts"] partitions, padding id 0)
// that both the bag (mean) and the dense ids (two per row) look up,
// concatenated with x into a dense output layer; squared error. With
// params["tied"] the table is also read densely: a penalty on the squares
// of the bag embeddings' products with its rows.
func partModel(s *towers.Scope, _ model.Mode, f model.Features, l model.Labels, p model.Params) (*model.Spec, error) {
	dt := p["dtype"].(tensor.Dtype)
	m := layers.NewModule(s, "")
	emb, err := layers.NewEmbedding(m, "emb", layers.EmbeddingConfig{Vocab: 20, Dim: 4, Dtype: dt, Values: partTable(dt),
		Padded: true, PaddingID: 0, Partitions: p["parts"].(int)})
	if err != nil {
		return nil, err
	}
	sf, err := s.SparseFeature("bag")
	if err != nil {
		return nil, err
	}
	e1, err := emb.LookupSparse(sf, layers.CombineMean)
	if err != nil {
		return nil, err
	}
	e2, err := emb.Lookup(f.Get("ids"))
	if err != nil {
		return nil, err
	}
	rows := e1.Shape()[0]
	e2 = G.Must(G.Reshape(e2, tensor.Shape{rows, 8}))
	x := f.Get("x")
	out, err := layers.NewDense(m, "out", layers.DenseConfig{In: 15, Units: 1, Dtype: dt})
	if err != nil {
		return nil, err
	}
	pred, err := out.Apply(G.Must(G.Concat(1, x, e1, e2)))
	if err != nil {
		return nil, err
	}
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, l.Get("y")))))))
	if p["tied"] == true {
		prod := G.Must(G.Mul(e1, G.Must(G.Transpose(emb.Table()))))
		loss = G.Must(G.Add(loss, G.Must(G.Mean(G.Must(G.Square(prod))))))
	}
	return &model.Spec{Loss: loss, Predictions: map[string]*G.Node{"p": pred}}, nil
}

// partBatch is embedBatch(i) with its float features and labels of
// dtype dt.
func partBatch(i int, dt tensor.Dtype) sharding.Batch {
	b := embedBatch(i)
	if dt == tensor.Float32 {
		for _, m := range []map[string]*tensor.Dense{b.Features, b.Labels} {
			for k, v := range m {
				if d, ok := v.Data().([]float64); ok {
					f := make([]float32, len(d))
					for j, x := range d {
						f[j] = float32(x)
					}
					m[k] = tensor.New(tensor.WithShape(v.Shape()...), tensor.WithBacking(f))
				}
			}
		}
	}
	return b
}

// partSuffix is the partition of a partitioned table's variable (and its
// slots') name.
var partSuffix = regexp.MustCompile(`/part_(\d+)`)

// wholeTables returns the engine's variables as float64s, a partitioned
// table's partitions (and each slot of theirs) concatenated in partition
// order under the name of the table not partitioned.
func wholeTables(t *testing.T, e *replicate.Engine) map[string][]float64 {
	t.Helper()
	type part struct {
		p    int
		vals []float64
	}
	parts := map[string][]part{}
	for _, name := range e.Store().Names() {
		v, _ := e.Store().Lookup(name)
		var vals []float64
		switch d := v.Data().(type) {
		case []float64:
			vals = slices.Clone(d)
		case []float32:
			for _, x := range d {
				vals = append(vals, float64(x))
			}
		default:
			continue
		}
		p := -1
		if m := partSuffix.FindStringSubmatch(name); m != nil {
			p, _ = strconv.Atoi(m[1])
		}
		key := partSuffix.ReplaceAllString(name, "")
		parts[key] = append(parts[key], part{p, vals})
	}
	out := map[string][]float64{}
	for k, ps := range parts {
		slices.SortFunc(ps, func(a, b part) int { return a.p - b.p })
		for i, p := range ps {
			if p.p != -1 && p.p != i {
				t.Fatalf("%s: partitions %v, want 0 to %d", k, ps, len(ps)-1)
			}
			out[k] = append(out[k], p.vals...)
		}
	}
	return out
}

// TestPartitionedTableEqualsOne: a table split into 3, 7 or 20 partitions
// (uneven ones among them), looked up by a sparse bag and by dense ids with
// a padding id, and read densely too (tied), trains on 1 to 3 towers to
// the same table, slots and other variables, bit for bit, as the table not
// partitioned on as many towers, float32 and float64, with SGD, Adagrad,
// Adam (dense and lazy) and FTRL: the arithmetic is the same, only where
// the rows live differs. The partitions are variables of their own,
// emb/embeddings/part_p, of the rows TensorFlow's "div" strategy gives.
func TestPartitionedTableEqualsOne(t *testing.T) {
	ctx := context.Background()
	opts := []struct {
		name string
		opt  func() optimizers.Optimizer
	}{
		{"SGD", func() optimizers.Optimizer { return optimizers.SGD(0.2) }},
		{"Adagrad", func() optimizers.Optimizer { return optimizers.Adagrad(0.1) }},
		{"Adam", func() optimizers.Optimizer { return optimizers.Adam(0.05) }},
		{"LazyAdam", func() optimizers.Optimizer { return optimizers.Adam(0.05, optimizers.Lazy()) }},
		{"FTRL", func() optimizers.Optimizer { return optimizers.FTRL(0.1) }},
	}
	run := func(t *testing.T, n, parts int, dt tensor.Dtype, tied bool, opt optimizers.Optimizer) *replicate.Engine {
		e, err := replicate.NewEngine(replicate.ModelFn(partModel, replicate.Config{Devices: towers.CPUs(n), Optimizer: opt}),
			replicate.EngineConfig{Seed: 5, Params: model.Params{"parts": parts, "dtype": dt, "tied": tied}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		for i := range 3 {
			if _, err := e.TrainStep(ctx, partBatch(i, dt), replicate.StepHooks{}); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		return e
	}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for _, tied := range []bool{false, true} {
			for _, o := range opts {
				for n := 1; n <= 3; n++ {
					t.Run(fmt.Sprintf("%v/tied=%v/%s/towers%d", dt, tied, o.name, n), func(t *testing.T) {
						one := wholeTables(t, run(t, n, 0, dt, tied, o.opt()))
						init, _ := numeric.SliceFloat64s(partTable(dt).Data())
						if cmp.Equal(one["emb/embeddings"], init) {
							t.Fatal("training left the table as it was")
						}
						for _, parts := range []int{3, 7, 20} {
							e := run(t, n, parts, dt, tied, o.opt())
							var rows []int
							for p := range parts {
								v, err := e.Store().Lookup(fmt.Sprintf("emb/embeddings/part_%d", p))
								if err != nil {
									t.Fatal(err)
								}
								rows = append(rows, v.Shape()[0])
							}
							if want := divRows(20, parts); !slices.Equal(rows, want) {
								t.Errorf("%d partitions have %v rows, want %v", parts, rows, want)
							}
							if diff := cmp.Diff(one, wholeTables(t, e)); diff != "" {
								t.Errorf("%d partitions (-one table +partitioned):\n%s", parts, diff)
							}
						}
					})
				}
			}
		}
	}
}

// divRows is the rows of each of parts partitions of vocab rows as
// TensorFlow's "div" partition strategy sizes them: as dealing the rows
// round the partitions does (the first vocab%parts get one more).
func divRows(vocab, parts int) []int {
	rows := make([]int, parts)
	for r := range vocab {
		rows[r%parts]++
	}
	return rows
}
