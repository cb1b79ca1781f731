package canned_test

import (
	"context"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// tabular is a small generated table: two numbers x1, x2 uniform in
// [−1, 1), a category cat in [0, 5), and a label.
type tabular struct {
	x1, x2 []float32
	cat    []int64
	label  []float32
}

// catEffect is each category's share of the score.
var catEffect = []float64{-1.5, -0.5, 0, 0.5, 1.5}

// score is the signal the labels follow: linear in x1, x2 and the
// category, plus a product of x1 and x2 that only a DNN can learn.
func score(x1, x2 float64, cat int64, product float64) float64 {
	return 2*x1 - 1.5*x2 + catEffect[cat] + product*x1*x2
}

// generate makes n rows from seed; label turns a row's score into its
// label.
func generate(n int, seed uint64, product float64, label func(s float64, r *rand.Rand) float32) tabular {
	r := rand.New(rand.NewPCG(seed, 7))
	var d tabular
	for range n {
		x1, x2, c := r.Float64()*2-1, r.Float64()*2-1, r.Int64N(5)
		d.x1, d.x2, d.cat = append(d.x1, float32(x1)), append(d.x2, float32(x2)), append(d.cat, c)
		d.label = append(d.label, label(score(x1, x2, c, product), r))
	}
	return d
}

// binaryLabel is 1 where the score plus a little logistic noise is
// positive.
func binaryLabel(s float64, r *rand.Rand) float32 {
	u := r.Float64()*0.998 + 0.001
	if s+0.3*math.Log(u/(1-u)) > 0 {
		return 1
	}
	return 0
}

// threeClasses cuts the score in three.
func threeClasses(s float64, _ *rand.Rand) float32 {
	switch {
	case s < -1:
		return 0
	case s < 1:
		return 1
	}
	return 2
}

// regressionLabel is the score plus a little noise.
func regressionLabel(s float64, r *rand.Rand) float32 { return float32(s + 0.1*r.NormFloat64()) }

// batch returns rows [lo, hi): x1 and x2 dense (rows, 1), cat sparse
// (rows, 1) int64 ids, the label (rows) float32.
func (d tabular) batch(lo, hi int, withLabels bool) sharding.Batch {
	n := hi - lo
	idx := make([][]int, n)
	for i := range idx {
		idx[i] = []int{i, 0}
	}
	b := sharding.Batch{
		Features: map[string]*tensor.Dense{
			"x1": dense(slices.Clone(d.x1[lo:hi]), n, 1),
			"x2": dense(slices.Clone(d.x2[lo:hi]), n, 1),
		},
		Sparse: map[string]sharding.SparseCOO{
			"cat": {Indices: idx, Values: dense(slices.Clone(d.cat[lo:hi]), n), DenseShape: []int{n, 1}},
		},
	}
	if withLabels {
		b.Labels = map[string]*tensor.Dense{"label": dense(slices.Clone(d.label[lo:hi]), n)}
	}
	return b
}

// input yields batches of size over d in order, for epochs passes (0:
// forever).
func (d tabular) input(size, epochs int, withLabels bool) estimator.InputFn {
	return func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for e := 0; epochs == 0 || e < epochs; e++ {
				for lo := 0; lo < len(d.x1); lo += size {
					if ctx.Err() != nil || !yield(d.batch(lo, min(lo+size, len(d.x1)), withLabels), nil) {
						return
					}
				}
			}
		}
	}
}

var (
	x1  = columns.Numeric("x1")
	x2  = columns.Numeric("x2")
	cat = columns.Identity("cat", 5)
)

func runConfig() estimator.RunConfig { return estimator.RunConfig{Seed: 1, LogEvery: -1} }

func oneTower(n int) replicate.Config { return replicate.Config{Devices: towers.CPUs(n)} }

// trainAndEvaluate trains est for steps on train, in batches of 50, and
// evaluates it on eval.
func trainAndEvaluate(t *testing.T, est *canned.Estimator, train, eval tabular, steps int64) map[string]float64 {
	t.Helper()
	t.Cleanup(func() { est.Close() })
	ctx := context.Background()
	if err := est.Train(ctx, train.input(50, 0, true), estimator.MaxSteps(steps)); err != nil {
		t.Fatal(err)
	}
	got, err := est.Evaluate(ctx, eval.input(500, 1, true))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCannedEstimatorsLearn(t *testing.T) {
	binTrain, binEval := generate(2000, 1, 0, binaryLabel), generate(1000, 2, 0, binaryLabel)
	// The product term needs the DNN.
	prodTrain, prodEval := generate(2000, 3, 3, binaryLabel), generate(1000, 4, 3, binaryLabel)
	mcTrain, mcEval := generate(2000, 5, 0, threeClasses), generate(1000, 6, 0, threeClasses)
	regTrain, regEval := generate(2000, 7, 0, regressionLabel), generate(1000, 8, 0, regressionLabel)
	tests := []struct {
		name        string
		make        func() (*canned.Estimator, error)
		train, eval tabular
		steps       int64
		// check returns what is wrong with the metrics, "" when they show
		// a learned model (chance is far below, or above, the bounds).
		check func(m map[string]float64) string
	}{
		{
			name: "LinearClassifier (FTRL)",
			make: func() (*canned.Estimator, error) {
				return canned.NewLinearClassifier(canned.LinearConfig{FeatureColumns: []columns.Column{x1, x2, cat}, Replicate: oneTower(2)}, runConfig())
			},
			train: binTrain, eval: binEval, steps: 300,
			check: atLeast(map[string]float64{"auc": 0.95, "accuracy": 0.88}),
		},
		{
			name: "LinearClassifier, three classes",
			make: func() (*canned.Estimator, error) {
				return canned.NewLinearClassifier(canned.LinearConfig{Head: canned.MultiClassHead{NClasses: 3}, FeatureColumns: []columns.Column{x1, x2, cat}, Replicate: oneTower(2)}, runConfig())
			},
			train: mcTrain, eval: mcEval, steps: 400,
			check: atLeast(map[string]float64{"accuracy": 0.85}),
		},
		{
			name: "LinearRegressor",
			make: func() (*canned.Estimator, error) {
				return canned.NewLinearRegressor(canned.LinearConfig{FeatureColumns: []columns.Column{x1, x2, cat}, Replicate: oneTower(2)}, runConfig())
			},
			train: regTrain, eval: regEval, steps: 400,
			// The labels' variance is about 2.6.
			check: atMost(map[string]float64{"average_loss": 0.1}),
		},
		{
			name: "DNNClassifier",
			make: func() (*canned.Estimator, error) {
				return canned.NewDNNClassifier(canned.DNNConfig{HiddenUnits: []int{16, 8}, FeatureColumns: []columns.Column{x1, x2}, Replicate: oneTower(2)}, runConfig())
			},
			// Without the category the best AUC is below 1.
			train: prodTrain, eval: prodEval, steps: 600,
			check: atLeast(map[string]float64{"auc": 0.85}),
		},
		{
			name: "DNNRegressor with dropout and batch norm",
			make: func() (*canned.Estimator, error) {
				return canned.NewDNNRegressor(canned.DNNConfig{HiddenUnits: []int{16}, Dropout: 0.1, BatchNorm: true, Activation: canned.Tanh,
					FeatureColumns: []columns.Column{x1, x2}, Optimizer: optimizers.Adagrad(0.2), Replicate: oneTower(2)}, runConfig())
			},
			// x1 and x2 explain all but the category's variance, about 1.
			// The moving statistics (momentum 0.999) take thousands of steps.
			train: regTrain, eval: regEval, steps: 3000,
			check: atMost(map[string]float64{"average_loss": 1.4}),
		},
		{
			name: "DNNLinearCombinedClassifier",
			make: func() (*canned.Estimator, error) {
				return canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
					LinearFeatureColumns: []columns.Column{cat, x1, x2}, LinearOptimizer: optimizers.FTRL(0.2),
					DNNFeatureColumns: []columns.Column{x1, x2}, DNNHiddenUnits: []int{16, 8}, DNNOptimizer: optimizers.Adagrad(0.05),
					Replicate: oneTower(2)}, runConfig())
			},
			train: prodTrain, eval: prodEval, steps: 600,
			check: atLeast(map[string]float64{"auc": 0.95}),
		},
		{
			name: "DNNLinearCombinedRegressor",
			make: func() (*canned.Estimator, error) {
				return canned.NewDNNLinearCombinedRegressor(canned.DNNLinearCombinedConfig{
					LinearFeatureColumns: []columns.Column{cat, x1, x2}, LinearOptimizer: optimizers.FTRL(0.2),
					DNNFeatureColumns: []columns.Column{x1, x2}, DNNHiddenUnits: []int{8}, DNNOptimizer: optimizers.Adagrad(0.05),
					Replicate: oneTower(2)}, runConfig())
			},
			train: regTrain, eval: regEval, steps: 400,
			check: atMost(map[string]float64{"average_loss": 0.1}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, err := tc.make()
			if err != nil {
				t.Fatal(err)
			}
			got := trainAndEvaluate(t, est, tc.train, tc.eval, tc.steps)
			if msg := tc.check(got); msg != "" {
				t.Errorf("%s after %d steps: %s", tc.name, tc.steps, msg)
			}
		})
	}
}

func atLeast(bounds map[string]float64) func(map[string]float64) string {
	return bounded(bounds, func(got, bound float64) bool { return got >= bound }, ">=")
}

func atMost(bounds map[string]float64) func(map[string]float64) string {
	return bounded(bounds, func(got, bound float64) bool { return got <= bound }, "<=")
}

func bounded(bounds map[string]float64, ok func(got, bound float64) bool, rel string) func(map[string]float64) string {
	return func(m map[string]float64) string {
		var bad []string
		for _, k := range slices.Sorted(mapsKeys(bounds)) {
			if v, found := m[k]; !found || !ok(v, bounds[k]) {
				bad = append(bad, fmt.Sprintf("%s = %v, want %s %v", k, v, rel, bounds[k]))
			}
		}
		if bad == nil {
			return ""
		}
		return strings.Join(bad, "; ") + fmt.Sprintf(" (metrics %v)", m)
	}
}

func mapsKeys(m map[string]float64) iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// wideDeep is the wide-and-deep classifier of the tower and export tests,
// with TensorFlow's default optimizers and, optionally, batch norm (no
// dropout, whose masks differ with the towers).
func wideDeep(t *testing.T, towerCount int, run estimator.RunConfig, batchNorm bool) *canned.Estimator {
	t.Helper()
	est, err := canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
		LinearFeatureColumns: []columns.Column{cat, x1},
		DNNFeatureColumns:    []columns.Column{x1, x2}, DNNHiddenUnits: []int{8, 4}, BatchNorm: batchNorm,
		Replicate: oneTower(towerCount)}, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	return est
}

// TestWideDeepTowersEqualOneDevice trains the wide-and-deep classifier
// (two optimizers over disjoint variables, sparse FTRL updates of the
// category's weights, batch norm synchronized over towers) for 20 steps of
// 50 on one device and on 2 and 3 towers: the variables agree.
func TestWideDeepTowersEqualOneDevice(t *testing.T) {
	data := generate(1000, 11, 3, binaryLabel)
	values := func(n int) map[string][]float32 {
		est := wideDeep(t, n, runConfig(), true)
		if err := est.Train(context.Background(), data.input(50, 0, true), estimator.MaxSteps(20)); err != nil {
			t.Fatal(err)
		}
		out := map[string][]float32{}
		for _, name := range est.VariableNames() {
			v, err := est.VariableValue(name)
			if err != nil {
				t.Fatal(err)
			}
			if f, ok := v.Data().([]float32); ok {
				out[name] = slices.Clone(f)
			}
		}
		return out
	}
	one := values(1)
	// Each optimizer keeps slots of its own part's variables alone.
	for _, want := range []string{
		"linear_model/cat/weights/Ftrl/accumulator", "linear_model/x1/weights/Ftrl/linear", "linear_model/bias_weights/Ftrl/accumulator",
		"dnn/hiddenlayer_0/kernel/Adagrad/accumulator", "dnn/logits/bias/Adagrad/accumulator",
		"dnn/hiddenlayer_1/batchnorm_1/gamma/Adagrad/accumulator",
	} {
		if _, ok := one[want]; !ok {
			t.Errorf("no variable %q; variables: %v", want, slices.Sorted(keys(one)))
		}
	}
	for name := range one {
		if strings.Contains(name, "/Ftrl/") && !strings.HasPrefix(name, "linear_model/") ||
			strings.Contains(name, "/Adagrad/") && !strings.HasPrefix(name, "dnn/") ||
			strings.Contains(name, "moving_") && strings.Contains(name, "/Adagrad/") {
			t.Errorf("slot %q of the other part's optimizer", name)
		}
	}
	if w := one["linear_model/cat/weights"]; slices.Equal(w, make([]float32, len(w))) {
		t.Errorf("the category's weights are still zero: the linear part did not train")
	}
	for _, n := range []int{2, 3} {
		got := values(n)
		if diff := cmp.Diff(one, got, cmpopts.EquateApprox(1e-4, 1e-5)); diff != "" {
			t.Errorf("%d towers differ from one device (-one +towers):\n%s", n, diff)
		}
	}
}

func keys(m map[string][]float32) iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestExportPredictsAsPredict exports a trained wide-and-deep classifier,
// loads it with export.Load and runs its predict signature on rows it did
// not train on: the answers are Predict's.
func TestExportPredictsAsPredict(t *testing.T) {
	ctx := context.Background()
	est := wideDeep(t, 2, runConfig(), true)
	train, rows := generate(500, 21, 3, binaryLabel), generate(7, 22, 3, binaryLabel)
	if err := est.Train(ctx, train.input(50, 0, true), estimator.MaxSteps(30)); err != nil {
		t.Fatal(err)
	}
	dir, err := est.Export(ctx, t.TempDir(), estimator.ServingInput{
		"x1":  {Dtype: tensor.Float32, Shape: []int{1}},
		"x2":  {Dtype: tensor.Float32, Shape: []int{1}},
		"cat": {Dtype: tensor.Int64, Shape: []int{1}, Sparse: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := export.Load(dir, est.Model())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want, _, _ := predictions(t, est.Estimator, nil, rows.input(7, 1, false))
	b := rows.batch(0, 7, false)
	out, err := p.RunSparse(ctx, canned.PredictSignature, b.Features, b.Sparse)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	for k, v := range out {
		got[k] = asFloats(t, v)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("export's predict signature differs from Predict (-Predict +export):\n%s", diff)
	}
	if probs := want["probabilities"]; len(probs) != 14 || slices.Equal(probs[:2], probs[2:4]) && slices.Equal(probs[2:4], probs[4:6]) {
		t.Errorf("probabilities %v: want 7 rows of a trained model", probs)
	}
	classify, err := p.RunSparse(ctx, "serving_default", b.Features, b.Sparse)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want["probabilities"], asFloats(t, classify["scores"]), cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("classify scores differ from the probabilities (-probabilities +scores):\n%s", diff)
	}
}

// TestWarmStart starts a model directory from another run's: before any
// training of its own it evaluates as that run does. (Warm start takes the
// trainable variables, as TensorFlow's default: the model has no batch
// norm, whose moving statistics would start afresh.)
func TestWarmStart(t *testing.T) {
	ctx := context.Background()
	data := generate(500, 31, 3, binaryLabel)
	first := runConfig()
	first.ModelDir = t.TempDir()
	a := wideDeep(t, 2, first, false)
	if err := a.Train(ctx, data.input(50, 0, true), estimator.MaxSteps(30)); err != nil {
		t.Fatal(err)
	}
	want, err := a.Evaluate(ctx, data.input(500, 1, true))
	if err != nil {
		t.Fatal(err)
	}
	second := runConfig()
	second.ModelDir, second.Seed = t.TempDir(), 2
	second.WarmStart = &estimator.WarmStart{From: first.ModelDir}
	b := wideDeep(t, 1, second, false)
	got, err := b.Evaluate(ctx, data.input(500, 1, true))
	if err != nil {
		t.Fatal(err)
	}
	// The global step starts afresh; the model is the first run's.
	delete(want, "global_step")
	delete(got, "global_step")
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-5)); diff != "" {
		t.Errorf("warm-started evaluation differs from the first run's (-first +warm):\n%s", diff)
	}
	cold := wideDeep(t, 1, estimator.RunConfig{Seed: 2, LogEvery: -1, ModelDir: t.TempDir()}, false)
	if err := cold.Train(ctx, data.input(50, 0, true), estimator.MaxSteps(1)); err != nil {
		t.Fatal(err)
	}
	c, err := cold.Evaluate(ctx, data.input(500, 1, true))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(c["auc"]-want["auc"]) < 1e-3 {
		t.Errorf("a cold start evaluates as the warm one (auc %v): the comparison shows nothing", c["auc"])
	}
}

func TestConstructorErrors(t *testing.T) {
	tests := []struct {
		name string
		make func() (*canned.Estimator, error)
		want []string
	}{
		{"classifier with a regression head", func() (*canned.Estimator, error) {
			return canned.NewLinearClassifier(canned.LinearConfig{Head: canned.RegressionHead{}, FeatureColumns: []columns.Column{x1}}, runConfig())
		}, []string{"NewLinearClassifier", "not a classifier's"}},
		{"regressor with a binary head", func() (*canned.Estimator, error) {
			return canned.NewDNNRegressor(canned.DNNConfig{Head: canned.BinaryHead{}, HiddenUnits: []int{2}, FeatureColumns: []columns.Column{x1}}, runConfig())
		}, []string{"NewDNNRegressor", "not a regressor's"}},
		{"estimator without a head", func() (*canned.Estimator, error) {
			return canned.NewLinearEstimator(canned.LinearConfig{FeatureColumns: []columns.Column{x1}}, runConfig())
		}, []string{"NewLinearEstimator", "no head"}},
		{"no columns", func() (*canned.Estimator, error) {
			return canned.NewLinearRegressor(canned.LinearConfig{}, runConfig())
		}, []string{"no FeatureColumns"}},
		{"no hidden units", func() (*canned.Estimator, error) {
			return canned.NewDNNClassifier(canned.DNNConfig{FeatureColumns: []columns.Column{x1}}, runConfig())
		}, []string{"no hidden units"}},
		{"zero-width layer", func() (*canned.Estimator, error) {
			return canned.NewDNNClassifier(canned.DNNConfig{HiddenUnits: []int{4, 0}, FeatureColumns: []columns.Column{x1}}, runConfig())
		}, []string{"hidden layer 1 has 0 units"}},
		{"dropout of 1", func() (*canned.Estimator, error) {
			return canned.NewDNNClassifier(canned.DNNConfig{HiddenUnits: []int{4}, Dropout: 1, FeatureColumns: []columns.Column{x1}}, runConfig())
		}, []string{"dropout rate 1"}},
		{"unknown activation", func() (*canned.Estimator, error) {
			return canned.NewDNNClassifier(canned.DNNConfig{HiddenUnits: []int{4}, Activation: "swish", FeatureColumns: []columns.Column{x1}}, runConfig())
		}, []string{`unknown activation "swish"`}},
		{"categorical column in a DNN", func() (*canned.Estimator, error) {
			return canned.NewDNNClassifier(canned.DNNConfig{HiddenUnits: []int{4}, FeatureColumns: []columns.Column{cat}}, runConfig())
		}, []string{`"cat" is not dense`, "Indicator", "Embedding"}},
		{"wide and deep without parts", func() (*canned.Estimator, error) {
			return canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{}, runConfig())
		}, []string{"at least one part"}},
		{"two optimizers of one name", func() (*canned.Estimator, error) {
			return canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
				LinearFeatureColumns: []columns.Column{cat}, LinearOptimizer: optimizers.Adagrad(0.1),
				DNNFeatureColumns: []columns.Column{x1}, DNNHiddenUnits: []int{2}}, runConfig())
		}, []string{`both named "Adagrad"`, "optimizers.Named"}},
		{"replication with an optimizer", func() (*canned.Estimator, error) {
			return canned.NewLinearClassifier(canned.LinearConfig{FeatureColumns: []columns.Column{x1}, Replicate: replicate.Config{Optimizer: optimizers.SGD(1)}}, runConfig())
		}, []string{"Replicate has an optimizer"}},
		{"nil head pointer", func() (*canned.Estimator, error) {
			return canned.NewLinearClassifier(canned.LinearConfig{Head: (*canned.BinaryHead)(nil), FeatureColumns: []columns.Column{x1}}, runConfig())
		}, []string{"NewLinearClassifier", "Head is a nil *canned.BinaryHead"}},
		{"bad head", func() (*canned.Estimator, error) {
			return canned.NewLinearClassifier(canned.LinearConfig{Head: canned.MultiClassHead{NClasses: 3, LabelVocabulary: []string{"a"}}, FeatureColumns: []columns.Column{x1}}, runConfig())
		}, []string{"label vocabulary", "1 entries, want 3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, err := tc.make()
			if err == nil {
				est.Close()
			}
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

// TestDefaultLearningRates checks TensorFlow's default FTRL rates by one
// step from zero weights: the bias's gradient is g = mean(0.5 − label), and
// FTRL (initial accumulator 0.1, power −0.5) sets it to −lr·g/√(0.1 + g²).
func TestDefaultLearningRates(t *testing.T) {
	data := generate(40, 51, 0, binaryLabel)
	var mean float64
	for _, y := range data.label {
		mean += float64(y) / 40
	}
	g := 0.5 - mean
	tests := []struct {
		name string
		make func() (*canned.Estimator, error)
		lr   float64
	}{
		{"LinearClassifier, 3 columns: min(0.2, 1/√3)", func() (*canned.Estimator, error) {
			return canned.NewLinearClassifier(canned.LinearConfig{FeatureColumns: []columns.Column{x1, x2, cat}}, runConfig())
		}, 0.2},
		{"DNNLinearCombinedClassifier, 3 columns: min(0.005, 1/√3)", func() (*canned.Estimator, error) {
			return canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{LinearFeatureColumns: []columns.Column{x1, x2, cat}}, runConfig())
		}, 0.005},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, err := tc.make()
			if err != nil {
				t.Fatal(err)
			}
			defer est.Close()
			if err := est.Train(context.Background(), data.input(40, 0, true), estimator.MaxSteps(1)); err != nil {
				t.Fatal(err)
			}
			b, err := est.VariableValue("linear_model/bias_weights")
			if err != nil {
				t.Fatal(err)
			}
			want := -tc.lr * g / math.Sqrt(0.1+g*g)
			if got := float64(b.Data().([]float32)[0]); math.Abs(got-want) > 1e-6 {
				t.Errorf("bias after one step %v, want %v (learning rate %v)", got, want, tc.lr)
			}
		})
	}
}
