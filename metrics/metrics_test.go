package metrics

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// approxState compares state vectors, which are sums of the same terms in
// possibly different orders.
var approxState = cmpopts.EquateApprox(1e-12, 1e-9)

// approxResult compares results; the AUC ones carry TF's 1e-6 epsilons, so
// values worked out by hand are off by about 1e-6.
var approxResult = cmpopts.EquateApprox(0, 1e-5)

// vec makes a 1-D tensor of the given backing slice.
func vec(backing any) *tensor.Dense {
	return tensor.New(tensor.WithBacking(backing))
}

// mat makes a tensor of the given shape.
func mat(backing any, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
}

func scalar(v any) *tensor.Dense { return tensor.New(tensor.FromScalar(v)) }

func ts(t ...*tensor.Dense) []*tensor.Dense { return t }

// vectors returns one float64 vector node of length n per name, in a new
// graph.
func vectors(n int, names ...string) []*G.Node {
	g := G.NewGraph()
	nodes := make([]*G.Node, len(names))
	for i, name := range names {
		nodes[i] = G.NewVector(g, G.Float64, G.WithShape(n), G.WithName(name))
	}
	return nodes
}

// must returns m, failing the program on err: for constructors whose
// configuration is known good.
func must(m Metric, err error) Metric {
	if err != nil {
		panic(err)
	}
	return m
}

func mustAUC(opts ...Option) Metric { return must(NewAUC(opts...)) }

func TestKnownValues(t *testing.T) {
	auc := func(n int, c CurveKind) func() Metric {
		return func() Metric { return mustAUC(NumThresholds(n), Curve(c)) }
	}
	// The running example for AUC: positives at 0.95 and 0.35, negatives at
	// 0.85 and 0.15. Of the 4 (positive, negative) pairs, 3 are ordered
	// correctly, so the exact ROC AUC is 0.75.
	labels4 := vec([]float64{1, 0, 1, 0})
	preds4 := vec([]float64{0.95, 0.85, 0.35, 0.15})
	tests := []struct {
		name      string
		newMetric func() Metric
		batches   [][]*tensor.Dense
		want      float64
		wantState []float64 // nil: not checked
	}{
		{
			// 3 of 4 equal: 3/4.
			name:      "accuracy",
			newMetric: NewAccuracy,
			batches:   [][]*tensor.Dense{ts(vec([]int64{1, 2, 3, 4}), vec([]int64{1, 2, 0, 4}))},
			want:      0.75,
			wantState: []float64{3, 4},
		},
		{
			// correct = [1,1,0,1], weights [1,1,2,0]: total 1+1+0+0 = 2,
			// count 1+1+2+0 = 4, 2/4.
			name:      "accuracy weighted",
			newMetric: NewAccuracy,
			batches: [][]*tensor.Dense{ts(vec([]int64{1, 2, 3, 4}), vec([]int64{1, 2, 0, 4}),
				vec([]float64{1, 1, 2, 0}))},
			want:      0.5,
			wantState: []float64{2, 4},
		},
		{
			// labels [0,1,0,1,1]: mean 3/5, baseline max(0.6, 0.4).
			name:      "accuracy baseline",
			newMetric: NewAccuracyBaseline,
			batches:   [][]*tensor.Dense{ts(vec([]float64{0, 1, 0, 1, 1}))},
			want:      0.6,
			wantState: []float64{3, 5},
		},
		{
			// labels [1,0,0] weighted [1,2,3]: total 1, count 6; the
			// negatives dominate: (6-1)/6. Two batches stream.
			name:      "accuracy baseline weighted, negatives more frequent",
			newMetric: NewAccuracyBaseline,
			batches: [][]*tensor.Dense{
				ts(mat([]int64{1, 0}, 2, 1), vec([]float64{1, 2})),
				ts(mat([]int64{0}, 1, 1), vec([]float64{3})),
			},
			want:      5.0 / 6,
			wantState: []float64{1, 6},
		},
		{
			// Two batches: 1 of 2, then 2 of 2: 3/4.
			name:      "accuracy streaming",
			newMetric: NewAccuracy,
			batches: [][]*tensor.Dense{
				ts(vec([]int{0, 1}), vec([]int{0, 0})),
				ts(vec([]int{1, 1}), vec([]int{1, 1})),
			},
			want:      0.75,
			wantState: []float64{3, 4},
		},
		{
			// TF casts predictions to the labels' dtype: int(1.7)=1,
			// int(0.2)=0, int(1.99)=1 against [1,0,2]: 2/3.
			name:      "accuracy int labels truncate float predictions",
			newMetric: NewAccuracy,
			batches:   [][]*tensor.Dense{ts(vec([]int32{1, 0, 2}), vec([]float64{1.7, 0.2, 1.99}))},
			want:      2.0 / 3,
			wantState: []float64{2, 3},
		},
		{
			// bool(0.5)=true, bool(0)=false, bool(0)=false against
			// [true,false,true]: 2/3.
			name:      "accuracy bool labels",
			newMetric: NewAccuracy,
			batches:   [][]*tensor.Dense{ts(vec([]bool{true, false, true}), vec([]float32{0.5, 0, 0}))},
			want:      2.0 / 3,
			wantState: []float64{2, 3},
		},
		{
			// float32(0.1) == float32(float64 0.1), though not as float64.
			name:      "accuracy float32 labels round float64 predictions",
			newMetric: NewAccuracy,
			batches:   [][]*tensor.Dense{ts(vec([]float32{0.1}), vec([]float64{0.1}))},
			want:      1,
			wantState: []float64{1, 1},
		},
		{
			// Shapes (4) and (4, 1): same elements, 4/4.
			name:      "accuracy column predictions",
			newMetric: NewAccuracy,
			batches:   [][]*tensor.Dense{ts(vec([]int{1, 2, 3, 4}), mat([]int{1, 2, 3, 4}, 4, 1))},
			want:      1,
			wantState: []float64{4, 4},
		},
		{
			name:      "accuracy no data",
			newMetric: NewAccuracy,
			want:      0,
			wantState: []float64{0, 0},
		},
		{
			// (1+2+3+4)/4.
			name:      "mean",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(vec([]float64{1, 2, 3, 4}))},
			want:      2.5,
			wantState: []float64{10, 4},
		},
		{
			// (1*1 + 2*0 + 3*2 + 4*1) / (1+0+2+1) = 11/4.
			name:      "mean weighted",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(vec([]float64{1, 2, 3, 4}), vec([]float64{1, 0, 2, 1}))},
			want:      2.75,
			wantState: []float64{11, 4},
		},
		{
			// Row weights [1, 3] over [[1,2,3],[4,5,6]]:
			// (6*1 + 15*3) / (3*1 + 3*3) = 51/12.
			name:      "mean weights [batch] broadcast over trailing dims",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(mat([]float64{1, 2, 3, 4, 5, 6}, 2, 3), vec([]float64{1, 3}))},
			want:      4.25,
			wantState: []float64{51, 12},
		},
		{
			// Same with weights of shape (2, 1).
			name:      "mean weights [batch,1]",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(mat([]float64{1, 2, 3, 4, 5, 6}, 2, 3), mat([]float64{1, 3}, 2, 1))},
			want:      4.25,
			wantState: []float64{51, 12},
		},
		{
			// Column weights (1, 3) = [[1,0,2]] over [[1,2,3],[4,5,6]]:
			// (1+0+6 + 4+0+12) / (3+3) = 23/6.
			name:      "mean weights [1,k] broadcast over batch",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(mat([]float64{1, 2, 3, 4, 5, 6}, 2, 3), mat([]float64{1, 0, 2}, 1, 3))},
			want:      23.0 / 6,
			wantState: []float64{23, 6},
		},
		{
			// Weights (2, 3, 1) squeeze to (2, 3): (1*1+2*2+3*3+4*4) / (1+2+3+4) = 30/10.
			name:      "mean weights with extra trailing 1",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(mat([]float64{1, 2, 3, 4}, 2, 2), mat([]float64{1, 2, 3, 4}, 2, 2, 1))},
			want:      3,
			wantState: []float64{30, 10},
		},
		{
			// Scalar weight 2 over [1,2,3]: (2+4+6) / (2+2+2) = 2.
			name:      "mean scalar weight",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(vec([]float64{1, 2, 3}), scalar(2.0))},
			want:      2,
			wantState: []float64{12, 6},
		},
		{
			// A scalar value and int32 values: (5 + 1 + 2) / 3.
			name:      "mean scalar and int inputs",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(scalar(5.0)), ts(vec([]int32{1, 2}))},
			want:      8.0 / 3,
			wantState: []float64{8, 3},
		},
		{
			// All weights 0: count 0, and the mean is 0 (div_no_nan).
			name:      "mean all masked",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(vec([]float64{1, 2}), vec([]float64{0, 0}))},
			want:      0,
			wantState: []float64{0, 0},
		},
		{
			name:      "mean empty batch",
			newMetric: NewMean,
			batches:   [][]*tensor.Dense{ts(mat([]float64{}, 0))},
			want:      0,
			wantState: []float64{0, 0},
		},
		{
			// Every positive above every negative: ROC points run from
			// (1,1) through (0,1) to (0,0); area 1.
			name:      "auc ROC perfect ranking",
			newMetric: auc(200, ROC),
			batches:   [][]*tensor.Dense{ts(vec([]int{0, 0, 1, 1}), vec([]float32{0.1, 0.4, 0.6, 0.9}))},
			want:      1,
		},
		{
			// Every positive below every negative: points from (1,1)
			// through (1,0) to (0,0); area 0.
			name:      "auc ROC inverted ranking",
			newMetric: auc(200, ROC),
			batches:   [][]*tensor.Dense{ts(vec([]int{0, 0, 1, 1}), vec([]float32{0.9, 0.6, 0.4, 0.1}))},
			want:      0,
		},
		{
			// Thresholds -eps, 0.1, ..., 0.9, 1+eps. (fp_rate, recall)
			// while the threshold rises: (1,1) until 0.15 (negative) drops
			// out at 0.2: (0.5,1); 0.35 (positive) at 0.4: (0.5,0.5); 0.85
			// (negative) at 0.9: (0,0.5); 0.95 at 1: (0,0). Trapezoids:
			// 0.5*(1+1)/2 + 0.5*(0.5+0.5)/2 = 0.5 + 0.25 = 0.75, the exact AUC.
			name:      "auc ROC mixed",
			newMetric: auc(11, ROC),
			batches:   [][]*tensor.Dense{ts(labels4, preds4)},
			want:      0.75,
		},
		{
			// Same data, weights [1,1,1,3]: P = 2, N = 1+3 = 4. Points
			// (1,1), (1/4,1) once 0.15 drops out, (1/4,1/2), (0,1/2), (0,0):
			// 3/4*(1+1)/2 + 1/4*(1/2+1/2)/2 = 0.75 + 0.125 = 0.875, which is
			// the weighted pair count (1*4 + 1*3) / (2*4) = 7/8.
			name:      "auc ROC weighted",
			newMetric: auc(11, ROC),
			batches:   [][]*tensor.Dense{ts(labels4, preds4, vec([]float64{1, 1, 1, 3}))},
			want:      0.875,
		},
		{
			// Only thresholds -eps, 0.5, 1+eps: points (1,1), (0.5,0.5),
			// (0,0); area 0.5*1.5/2 + 0.5*0.5/2 = 0.375 + 0.125 = 0.5: the
			// coarse discretization loses the ordering inside each half.
			name:      "auc ROC 3 thresholds",
			newMetric: auc(3, ROC),
			batches:   [][]*tensor.Dense{ts(labels4, preds4)},
			want:      0.5,
			// tp, fn, tn, fp at -eps, 0.5, 1+eps.
			wantState: []float64{2, 1, 0, 0, 1, 2, 0, 1, 2, 2, 1, 0},
		},
		{
			// (recall, precision): tp=2,fp=2 (1, 1/2) at -eps and 0.1;
			// tp=2,fp=1 (1, 2/3) from 0.2; tp=1,fp=1 (1/2, 1/2) from 0.4;
			// tp=1,fp=0 (1/2, 1) at 0.9; tp=0,fp=0 (0, eps/eps=1) at 1 and
			// 1+eps. Trapezoids with nonzero width: (1-1/2)*(2/3+1/2)/2 =
			// 7/24 and (1/2-0)*(1+1)/2 = 12/24; area 19/24.
			name:      "auc PR mixed",
			newMetric: auc(11, PR),
			batches:   [][]*tensor.Dense{ts(labels4, preds4)},
			want:      19.0 / 24,
		},
		{
			// Predictions on thresholds -eps, 0.5, 1+eps: 0 and 0.5 and 1
			// are above -eps; 0.5 is not above 0.5 (strict >), 1 is; none is
			// above 1+eps. Labels 2 and true cast to true.
			name:      "auc predictions on thresholds",
			newMetric: auc(3, ROC),
			batches: [][]*tensor.Dense{
				ts(vec([]int{2, 0, 1}), vec([]float64{0.5, 0, 1})),
				ts(vec([]bool{true}), vec([]float32{1})),
			},
			// tp: 3 positives above -eps; 0.5 not above 0.5, two 1s are:
			// [3, 2, 0]; fn = 3 - tp; the negative 0 is above -eps only.
			wantState: []float64{3, 2, 0, 0, 1, 3, 0, 1, 1, 1, 0, 0},
			// Points (1,1), (0,2/3), (0,0): 1*(1+2/3)/2 = 5/6.
			want: 5.0 / 6,
		},
		{
			name:      "auc no data",
			newMetric: auc(5, ROC),
			want:      0,
			wantState: make([]float64, 20),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.newMetric()
			for i, b := range tc.batches {
				if err := m.Update(b); err != nil {
					t.Fatalf("Update(batch %d): %v", i, err)
				}
			}
			if tc.wantState != nil {
				if d := cmp.Diff(tc.wantState, m.State(), approxState); d != "" {
					t.Errorf("State() mismatch (-want +got):\n%s", d)
				}
			}
			if d := cmp.Diff(tc.want, m.Result(), approxResult); d != "" {
				t.Errorf("Result() mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestAUCThresholds(t *testing.T) {
	m := mustAUC(NumThresholds(5)).(*aucMetric)
	want := []float32{-1e-7, 0.25, 0.5, 0.75, 1 + 1e-7}
	if d := cmp.Diff(want, m.thresholds); d != "" {
		t.Errorf("Thresholds() mismatch (-want +got):\n%s", d)
	}
	if got, want := m.Kind(), "auc(curve=ROC,thresholds=5)"; got != want {
		t.Errorf("Kind() = %q, want %q", got, want)
	}
	if got, want := mustAUC().Kind(), "auc(curve=ROC,thresholds=200)"; got != want {
		t.Errorf("default Kind() = %q, want %q", got, want)
	}
	if got, want := mustAUC(Curve(PR)).Kind(), "auc(curve=PR,thresholds=200)"; got != want {
		t.Errorf("PR Kind() = %q, want %q", got, want)
	}
	if got := len(mustAUC().State()); got != 800 {
		t.Errorf("len(State()) = %d, want 4*200", got)
	}
}

func TestAUCMatchesPairCount(t *testing.T) {
	// With predictions strictly between distinct thresholds, the ROC
	// trapezoids are exact: the AUC is the weighted fraction of
	// (positive, negative) pairs ranked correctly, ties counting half.
	for seed := uint64(0); seed < 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		n := 2 + r.IntN(30)
		labels := make([]bool, n)
		preds := make([]float64, n)
		weights := make([]float64, n)
		for i := range n {
			labels[i] = r.IntN(2) == 1
			preds[i] = (float64(r.IntN(99)) + 0.5) / 100 // bucket centers
			weights[i] = r.Float64() * 2
		}
		var num, den float64
		for i := range n {
			for j := range n {
				if !labels[i] || labels[j] {
					continue
				}
				w := weights[i] * weights[j]
				den += w
				switch {
				case preds[i] > preds[j]:
					num += w
				case preds[i] == preds[j]:
					num += w / 2
				}
			}
		}
		if den == 0 {
			continue
		}
		m := mustAUC(NumThresholds(101))
		if err := m.Update(ts(vec(labels), vec(preds), vec(weights))); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(num/den, m.Result(), approxResult); d != "" {
			t.Errorf("seed %d: AUC mismatch with pair count (-want +got):\n%s", seed, d)
		}
	}
}

// dataset is random data for one metric, split into parts by example.
type dataset struct {
	n       int
	labels  []int64
	preds   []float64 // for Mean: the values; n*cols scores with cols > 0
	cols    int       // 0: preds is a vector; else predictions have shape [n, cols]
	weights []float64 // nil: unweighted
}

func (d dataset) slice(lo, hi int) []*tensor.Dense {
	var p *tensor.Dense
	if d.cols == 0 {
		p = vec(append([]float64{}, d.preds[lo:hi]...))
	} else {
		p = mat(append([]float64{}, d.preds[lo*d.cols:hi*d.cols]...), hi-lo, d.cols)
	}
	out := ts(vec(append([]int64{}, d.labels[lo:hi]...)), p)
	if d.weights != nil {
		out = append(out, vec(append([]float64{}, d.weights[lo:hi]...)))
	}
	return out
}

// Data generators for randomData.
type dataKind int

const (
	binaryData     dataKind = iota // labels and predictions mostly 0/1
	valueData                      // values for Mean
	regressionData                 // integer labels, real predictions
	scoreData                      // binary labels, predictions in [0, 1]
	classIDData                    // class ids in [0, 4)
	topKData                       // class ids, some out of range; scores [n, 4] with ties
)

type metricCase struct {
	name      string
	newMetric func() Metric
	// inputs picks the metric's inputs from labels, preds[, weights].
	inputs func([]*tensor.Dense) []*tensor.Dense
	data   dataKind
}

func all(in []*tensor.Dense) []*tensor.Dense { return in }

func dropLabels(in []*tensor.Dense) []*tensor.Dense { return in[1:] }

// metricCases holds every metric kind of the package.
var metricCases = []metricCase{
	{"accuracy", NewAccuracy, all, binaryData},
	{"mean", NewMean, dropLabels, valueData},
	{"auc", func() Metric { return mustAUC() }, all, scoreData},
	{"auc-pr-50", func() Metric { return mustAUC(Curve(PR), NumThresholds(50)) }, all, scoreData},
	{"mse", NewMeanSquaredError, all, regressionData},
	{"rmse", NewRootMeanSquaredError, all, regressionData},
	{"mae", NewMeanAbsoluteError, all, regressionData},
	{"precision", NewPrecision, all, binaryData},
	{"recall", NewRecall, all, binaryData},
	{"true_positives", NewTruePositives, all, binaryData},
	{"false_positives", NewFalsePositives, all, binaryData},
	{"true_negatives", NewTrueNegatives, all, binaryData},
	{"false_negatives", NewFalseNegatives, all, binaryData},
	{"precision_at_thresholds", func() Metric { return must(NewPrecisionAtThresholds([]float64{0.5, 0, 0.3, 1})) }, all, scoreData},
	{"recall_at_thresholds", func() Metric { return must(NewRecallAtThresholds([]float64{0.7, 0.2, 0.5})) }, all, scoreData},
	{"mean_iou", func() Metric { return must(NewMeanIoU(4)) }, all, classIDData},
	{"recall_at_1", func() Metric { return must(NewRecallAtK(1)) }, all, topKData},
	{"recall_at_2", func() Metric { return must(NewRecallAtK(2)) }, all, topKData},
}

func randomData(r *rand.Rand, mc metricCase) dataset {
	n := r.IntN(60)
	d := dataset{n: n, labels: make([]int64, n), preds: make([]float64, n)}
	if mc.data == topKData {
		d.cols = 4
		d.preds = make([]float64, n*d.cols)
	}
	for i := range n {
		switch mc.data {
		case binaryData:
			d.labels[i] = int64(r.IntN(2))
			d.preds[i] = float64(r.IntN(2))
			if r.IntN(8) == 0 {
				d.preds[i] = 0.3 // nonzero: true for precision, 0 for int accuracy
			}
		case valueData:
			d.preds[i] = r.NormFloat64() * 10
		case regressionData:
			d.labels[i] = int64(r.IntN(11) - 5)
			d.preds[i] = r.NormFloat64() * 3
		case scoreData:
			d.labels[i] = int64(r.IntN(2))
			if r.IntN(4) == 0 {
				d.preds[i] = float64(r.IntN(11)) / 10 // on or near thresholds
			} else {
				d.preds[i] = r.Float64()
			}
		case classIDData:
			// Class 3 is rare, so often absent from a part or the whole.
			d.labels[i] = int64(r.IntN(3))
			d.preds[i] = float64(r.IntN(3))
			if r.IntN(20) == 0 {
				d.preds[i] = 3
			}
		case topKData:
			d.labels[i] = int64(r.IntN(5)) // 4 is out of range: always a miss
			for j := range d.cols {
				d.preds[i*d.cols+j] = float64(r.IntN(4)) / 4 // ties are common
			}
		}
	}
	if r.IntN(2) == 0 {
		d.weights = make([]float64, n)
		for i := range n {
			d.weights[i] = r.Float64() * 3
		}
	}
	return d
}

func TestMergeLaw(t *testing.T) {
	// For random data split at random into 1..5 parts (some possibly empty),
	// merging the parts' states gives the state, and so the result, of the
	// whole.
	for _, mc := range metricCases {
		t.Run(mc.name, func(t *testing.T) {
			for seed := uint64(0); seed < 100; seed++ {
				r := rand.New(rand.NewPCG(seed, 1))
				d := randomData(r, mc)
				whole := mc.newMetric()
				if err := whole.Update(mc.inputs(d.slice(0, d.n))); err != nil {
					t.Fatalf("seed %d: whole: %v", seed, err)
				}
				k := 1 + r.IntN(5)
				cuts := []int{0, d.n}
				for range k - 1 {
					cuts = append(cuts, r.IntN(d.n+1))
				}
				sortInts(cuts)
				merged := mc.newMetric()
				for p := 0; p+1 < len(cuts); p++ {
					part := mc.newMetric()
					if err := part.Update(mc.inputs(d.slice(cuts[p], cuts[p+1]))); err != nil {
						t.Fatalf("seed %d: part %d: %v", seed, p, err)
					}
					if err := Merge(merged, part); err != nil {
						t.Fatalf("seed %d: Merge: %v", seed, err)
					}
				}
				if diff := cmp.Diff(whole.State(), merged.State(), approxState); diff != "" {
					t.Fatalf("seed %d, %d parts %v: merged state != whole state (-whole +merged):\n%s", seed, k, cuts, diff)
				}
				wr, mr := Results(map[string]Metric{"m": whole}), Results(map[string]Metric{"m": merged})
				if diff := cmp.Diff(wr, mr, approxState); diff != "" {
					t.Fatalf("seed %d: merged result != whole result (-whole +merged):\n%s", seed, diff)
				}
			}
		})
	}
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// newTowers returns n towers of the same metrics, each updated with its own
// shard of random data, and one more set of metrics updated with all of it.
func newTowers(t *testing.T, n int, seed uint64) (towers []map[string]Metric, whole map[string]Metric) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	mk := func() map[string]Metric {
		ms := map[string]Metric{}
		for _, mc := range metricCases {
			ms[mc.name] = mc.newMetric()
		}
		return ms
	}
	whole = mk()
	for range n {
		tower := mk()
		for _, mc := range metricCases {
			d := randomData(r, mc)
			for len(d.labels) == 0 {
				d = randomData(r, mc)
			}
			in := mc.inputs(d.slice(0, d.n))
			if err := tower[mc.name].Update(in); err != nil {
				t.Fatal(err)
			}
			if err := whole[mc.name].Update(in); err != nil {
				t.Fatal(err)
			}
		}
		towers = append(towers, tower)
	}
	return towers, whole
}

func states(ms map[string]Metric) map[string][]float64 {
	out := map[string][]float64{}
	for name, m := range ms {
		if m != nil {
			out[name] = append([]float64(nil), m.State()...)
		}
	}
	return out
}

func TestReduceIntoFirstIdempotent(t *testing.T) {
	// The towers hold one metric of every kind of metricCases.
	for n := 1; n <= 4; n++ {
		towers, whole := newTowers(t, n, uint64(n))
		if err := ReduceIntoFirst(towers); err != nil {
			t.Fatalf("%d towers: first ReduceIntoFirst: %v", n, err)
		}
		once := states(towers[0])
		if d := cmp.Diff(states(whole), once, approxState); d != "" {
			t.Errorf("%d towers: tower 0 after reduce != whole data (-whole +tower0):\n%s", n, d)
		}
		if d := cmp.Diff(Results(whole), Results(towers[0]), approxState); d != "" {
			t.Errorf("%d towers: results != whole data (-whole +tower0):\n%s", n, d)
		}
		for range 19 {
			if err := ReduceIntoFirst(towers); err != nil {
				t.Fatalf("%d towers: repeated ReduceIntoFirst: %v", n, err)
			}
		}
		if d := cmp.Diff(once, states(towers[0])); d != "" {
			t.Errorf("%d towers: twenty reduces != one (-once +twenty):\n%s", n, d)
		}
		for i := 1; i < n; i++ {
			for name, m := range towers[i] {
				if d := cmp.Diff(make([]float64, len(m.State())), m.State()); d != "" {
					t.Errorf("%d towers: tower %d metric %q not zeroed:\n%s", n, i, name, d)
				}
			}
			// A zeroed metric of every kind reads 0 (no NaN from 0/0).
			for name, v := range Results(towers[i]) {
				if v != 0 {
					t.Errorf("%d towers: tower %d result %q = %v after the reduce, want 0", n, i, name, v)
				}
			}
		}
	}
	if err := ReduceIntoFirst(nil); err != nil {
		t.Errorf("ReduceIntoFirst(nil) = %v", err)
	}
}

// oddMetric has the kind of a mean but a longer state.
type oddMetric struct{ state [3]float64 }

func (o *oddMetric) Kind() string                    { return "mean" }
func (o *oddMetric) State() []float64                { return o.state[:] }
func (o *oddMetric) Update(in []*tensor.Dense) error { return nil }
func (o *oddMetric) Result() float64                 { return 0 }

func TestReduceIntoFirstErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(towers []map[string]Metric)
		want   []string // substrings of the error
	}{
		{
			name:   "missing metric",
			modify: func(tw []map[string]Metric) { delete(tw[2], "auc") },
			want:   []string{"tower 2", `"auc"`, "missing"},
		},
		{
			name:   "extra metric",
			modify: func(tw []map[string]Metric) { tw[1]["extra"] = NewMean() },
			want:   []string{"tower 1", `"extra"`},
		},
		{
			name:   "extra metric in tower 2 only",
			modify: func(tw []map[string]Metric) { tw[2]["loss"] = NewMean() },
			want:   []string{"tower 2", `"loss"`},
		},
		{
			name:   "different kind",
			modify: func(tw []map[string]Metric) { tw[2]["auc"] = mustAUC(NumThresholds(10)) },
			want:   []string{"tower 2", `"auc"`, "auc(curve=ROC,thresholds=10)", "auc(curve=ROC,thresholds=200)"},
		},
		{
			name:   "different curve",
			modify: func(tw []map[string]Metric) { tw[1]["auc"] = mustAUC(Curve(PR)) },
			want:   []string{"tower 1", `"auc"`, "curve=PR"},
		},
		{
			name:   "swapped kinds",
			modify: func(tw []map[string]Metric) { tw[1]["mean"], tw[1]["accuracy"] = tw[1]["accuracy"], tw[1]["mean"] },
			want:   []string{"tower 1", `"accuracy"`},
		},
		{
			name:   "different state length",
			modify: func(tw []map[string]Metric) { tw[1]["mean"] = &oddMetric{state: [3]float64{1, 2, 3}} },
			want:   []string{"tower 1", `"mean"`, "state length 3", "tower 0 has 2"},
		},
		{
			name:   "nil replica metric",
			modify: func(tw []map[string]Metric) { tw[2]["mean"] = nil },
			want:   []string{"tower 2", `"mean"`, "nil"},
		},
		{
			name:   "nil tower 0 metric",
			modify: func(tw []map[string]Metric) { tw[0]["mean"] = nil },
			want:   []string{"tower 0", `"mean"`, "nil"},
		},
		{
			name:   "replica shares tower 0's metric",
			modify: func(tw []map[string]Metric) { tw[1]["mean"] = tw[0]["mean"] },
			want:   []string{"tower 1", `"mean"`, "shares"},
		},
		{
			name:   "nil replica map",
			modify: func(tw []map[string]Metric) { tw[1] = nil },
			want:   []string{"tower 1", "missing"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			towers, _ := newTowers(t, 3, 9)
			tc.modify(towers)
			before := make([]map[string][]float64, len(towers))
			for i := range towers {
				before[i] = states(towers[i])
			}
			err := ReduceIntoFirst(towers)
			if err == nil {
				t.Fatal("ReduceIntoFirst succeeded, want error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			for i := range towers {
				if d := cmp.Diff(before[i], states(towers[i])); d != "" {
					t.Errorf("tower %d modified despite the error (-before +after):\n%s", i, d)
				}
			}
		})
	}
}

func TestMergeErrors(t *testing.T) {
	tests := []struct {
		name     string
		dst, src Metric
		want     []string
	}{
		{"kinds", NewAccuracy(), NewMean(), []string{`"accuracy"`, `"mean"`}},
		{"thresholds", mustAUC(), mustAUC(NumThresholds(3)), []string{"thresholds=200", "thresholds=3"}},
		{"lengths", NewMean(), &oddMetric{state: [3]float64{1, 2, 3}}, []string{"dst 2", "src 3"}},
		{"nil", NewMean(), nil, []string{"nil"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.dst.State()[0] = 5
			before := append([]float64(nil), tc.dst.State()...)
			err := Merge(tc.dst, tc.src)
			if err == nil {
				t.Fatal("Merge succeeded, want error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if d := cmp.Diff(before, tc.dst.State()); d != "" {
				t.Errorf("dst modified (-before +after):\n%s", d)
			}
		})
	}
}

func TestReset(t *testing.T) {
	m := mustAUC(NumThresholds(4))
	if err := m.Update(ts(vec([]int{1, 0}), vec([]float64{0.3, 0.6}))); err != nil {
		t.Fatal(err)
	}
	Reset(m)
	if d := cmp.Diff(make([]float64, 16), m.State()); d != "" {
		t.Errorf("state after Reset (-want +got):\n%s", d)
	}
}

func TestUpdateErrors(t *testing.T) {
	f := func(v ...float64) *tensor.Dense { return vec(v) }
	tests := []struct {
		name   string
		metric func() Metric
		inputs []*tensor.Dense
		want   []string
	}{
		{"mean no inputs", NewMean, nil, []string{"mean", "got 0 inputs", "want 1 (values) or 2 (values, weights)"}},
		{"mean three inputs", NewMean, ts(f(1), f(1), f(1)), []string{"got 3 inputs"}},
		{"accuracy one input", NewAccuracy, ts(f(1)), []string{"accuracy", "got 1 inputs", "want 2 (labels, predictions)"}},
		{"accuracy four inputs", NewAccuracy, ts(f(1), f(1), f(1), f(1)), []string{"got 4 inputs"}},
		{"auc one input", func() Metric { return mustAUC() }, ts(f(1)), []string{"auc(curve=ROC,thresholds=200)", "got 1 inputs"}},
		{"nil labels", NewAccuracy, ts(nil, f(1)), []string{"labels (input 0)", "nil tensor"}},
		{"nil weights", NewMean, ts(f(1), nil), []string{"weights (input 1)", "nil tensor"}},
		{"unsupported dtype", NewMean, ts(vec([]string{"a"})), []string{"values (input 0)", "unsupported", "string"}},
		{"complex dtype", NewAccuracy, ts(f(1), vec([]complex128{1})), []string{"predictions (input 1)", "unsupported"}},
		{
			"accuracy size mismatch", NewAccuracy, ts(f(1, 2, 3), mat([]float64{1, 2, 3, 4}, 2, 2)),
			[]string{"labels of shape (3)", "predictions of shape (2, 2)"},
		},
		{
			"auc size mismatch", func() Metric { return mustAUC() }, ts(f(1, 0), mat([]float64{0.5}, 1)),
			[]string{"labels of shape (2)", "predictions of shape (1)"},
		},
		{
			"weights wrong length", NewMean, ts(mat([]float64{1, 2, 3, 4, 5, 6}, 2, 3), f(1, 2, 3)),
			[]string{"weights of shape (3)", "shape (2, 3)"},
		},
		{
			"weights higher rank", NewMean, ts(f(1, 2), mat([]float64{1, 2, 3, 4}, 2, 2)),
			[]string{"weights of shape (2, 2)", "shape (2)"},
		},
		{
			"weights vector for scalar value", NewMean, ts(scalar(1.0), f(1, 2)),
			[]string{"weights of shape (2)", "shape ()"},
		},
		{
			"accuracy weights", NewAccuracy, ts(f(1, 2), f(1, 2), f(1, 2, 3)),
			[]string{"accuracy", "weights of shape (3)"},
		},
		{
			"auc prediction above 1", func() Metric { return mustAUC() }, ts(f(1, 0), f(0.5, 1.5)),
			[]string{"predictions must be in [0, 1]", "element 1", "1.5"},
		},
		{
			"auc negative prediction", func() Metric { return mustAUC() }, ts(f(1), f(-0.1)),
			[]string{"predictions must be in [0, 1]", "-0.1"},
		},
		{
			"auc NaN prediction", func() Metric { return mustAUC() }, ts(f(1), f(math.NaN())),
			[]string{"predictions must be in [0, 1]", "NaN"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.metric()
			for i := range m.State() {
				m.State()[i] = float64(i + 1)
			}
			before := append([]float64(nil), m.State()...)
			err := m.Update(tc.inputs)
			if err == nil {
				t.Fatal("Update succeeded, want error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if d := cmp.Diff(before, m.State()); d != "" {
				t.Errorf("state modified despite the error (-before +after):\n%s", d)
			}
		})
	}
}

func TestFromDense(t *testing.T) {
	m := mat([]float64{1, 2, 3, 4, 5, 6}, 2, 3)
	col, err := m.Slice(nil, tensor.S(1)) // a strided view: [2, 5]
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   *tensor.Dense
		want []float64
	}{
		{"float32", vec([]float32{1.5, -2}), []float64{1.5, -2}},
		{"int", vec([]int{3, -4}), []float64{3, -4}},
		{"int8", vec([]int8{-8}), []float64{-8}},
		{"int64", vec([]int64{1 << 40}), []float64{1 << 40}},
		{"uint8", vec([]uint8{255}), []float64{255}},
		{"uint64", vec([]uint64{7}), []float64{7}},
		{"bool", vec([]bool{true, false}), []float64{1, 0}},
		{"scalar", scalar(int32(9)), []float64{9}},
		{"matrix", mat([]float64{1, 2, 3, 4}, 2, 2), []float64{1, 2, 3, 4}},
		{"view", col.(*tensor.Dense), []float64{2, 5}},
		{"empty", mat([]float64{}, 0), []float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromDense(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got.data); d != "" {
				t.Errorf("fromDense mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestBound(t *testing.T) {
	v := vectors(4, "labels", "preds", "w")
	labels, preds, w := v[0], v[1], v[2]
	tests := []struct {
		name       string
		b          Bound
		wantKind   string
		wantInputs []*G.Node
	}{
		{"accuracy", Accuracy(labels, preds), "accuracy", []*G.Node{labels, preds}},
		{"accuracy weighted", Accuracy(labels, preds, Weights(w)), "accuracy", []*G.Node{labels, preds, w}},
		{"mean", Mean(preds), "mean", []*G.Node{preds}},
		{"mean weighted", Mean(preds, Weights(w)), "mean", []*G.Node{preds, w}},
		{"auc", AUC(labels, preds), "auc(curve=ROC,thresholds=200)", []*G.Node{labels, preds}},
		{
			"auc pr weighted", AUC(labels, preds, Weights(w), NumThresholds(11), Curve(PR)),
			"auc(curve=PR,thresholds=11)", []*G.Node{labels, preds, w},
		},
	}
	vals := map[*G.Node]*tensor.Dense{
		labels: vec([]float64{1, 0, 1, 0}),
		preds:  vec([]float64{1, 0, 0, 0.5}),
		w:      vec([]float64{1, 1, 1, 1}),
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkBound(t, tc.b, tc.wantKind, tc.wantInputs, vals)
		})
	}
}

// checkBound checks a bound metric: no error, its kind and input nodes,
// that two New metrics have their own state, and that Bound.Update, reading
// the input nodes' values (set from vals), updates as Update on the values
// does.
func checkBound(t *testing.T, b Bound, wantKind string, wantInputs []*G.Node, vals map[*G.Node]*tensor.Dense) {
	t.Helper()
	if b.Err != nil {
		t.Fatalf("Bound.Err = %v", b.Err)
	}
	if got := b.Kind(); got != wantKind {
		t.Errorf("Kind() = %q, want %q", got, wantKind)
	}
	if d := cmp.Diff(wantInputs, b.Inputs, cmp.Comparer(func(a, b *G.Node) bool { return a == b })); d != "" {
		t.Errorf("Inputs mismatch (-want +got):\n%s", d)
	}
	m1, m2 := b.New(), b.New()
	m1.State()[0] = 1
	if m2.State()[0] != 0 {
		t.Error("two New() metrics share their state")
	}
	for _, n := range b.Inputs {
		if err := G.Let(n, vals[n]); err != nil {
			t.Fatal(err)
		}
	}
	m := b.New()
	if err := b.Update(m); err != nil {
		t.Fatalf("Bound.Update: %v", err)
	}
	direct := b.New()
	in := make([]*tensor.Dense, len(b.Inputs))
	for i, n := range b.Inputs {
		in[i] = vals[n]
	}
	if err := direct.Update(in); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(direct.State(), m.State()); d != "" {
		t.Errorf("Bound.Update state != Update state (-direct +bound):\n%s", d)
	}
}

func TestBoundUpdateWithoutValue(t *testing.T) {
	g := G.NewGraph()
	x := G.NewVector(g, G.Float64, G.WithShape(2), G.WithName("x"))
	b := Mean(x)
	err := b.Update(b.New())
	if err == nil || !strings.Contains(err.Error(), "x") || !strings.Contains(err.Error(), "no value") {
		t.Errorf("Bound.Update without a value: error %v, want one naming the node and saying it has no value", err)
	}
}

func TestUpdateValues(t *testing.T) {
	// Scalars as gorgonia values: mean of 3 and 4 (float64, int) = 3.5.
	m := NewMean()
	if err := UpdateValues(m, []G.Value{G.NewF64(3)}); err != nil {
		t.Fatal(err)
	}
	if err := UpdateValues(m, []G.Value{G.NewI(4)}); err != nil {
		t.Fatal(err)
	}
	if err := UpdateValues(m, []G.Value{vec([]float32{5, 6}), G.NewF32(0)}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]float64{7, 2}, m.State()); d != "" {
		t.Errorf("state (-want +got):\n%s", d)
	}
	if err := UpdateValues(m, []G.Value{nil}); err == nil || !strings.Contains(err.Error(), "input 0") {
		t.Errorf("UpdateValues(nil) error = %v, want one naming input 0", err)
	}
}

func TestResultsAndString(t *testing.T) {
	acc, mean := NewAccuracy(), NewMean()
	copy(acc.State(), []float64{1, 4})
	copy(mean.State(), []float64{3, 2})
	got := Results(map[string]Metric{"accuracy": acc, "loss": mean})
	want := map[string]float64{"accuracy": 0.25, "loss": 1.5}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Results (-want +got):\n%s", d)
	}
	if s, want := String(got), "accuracy=0.25, loss=1.5"; s != want {
		t.Errorf("String = %q, want %q", s, want)
	}
}
