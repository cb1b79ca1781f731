package metrics

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Known values of the metrics added for TF1's full tf.metrics set, each
// worked out by hand in the comment above it.
func TestKnownValuesTF(t *testing.T) {
	f := func(v ...float64) *tensor.Dense { return vec(v) }
	precAt := func(ts ...float64) func() Metric {
		return func() Metric { return must(NewPrecisionAtThresholds(ts)) }
	}
	recAt := func(ts ...float64) func() Metric {
		return func() Metric { return must(NewRecallAtThresholds(ts)) }
	}
	iou := func(n int) func() Metric { return func() Metric { return must(NewMeanIoU(n)) } }
	recK := func(k int) func() Metric { return func() Metric { return must(NewRecallAtK(k)) } }

	// Binary data: labels [1,0,1,1,0,0], predictions [1,1,0,1,0,1]:
	// tp at 0 and 3, fp at 1 and 5, fn at 2, tn at 4.
	binLabels := vec([]int{1, 0, 1, 1, 0, 0})
	binPreds := vec([]int{1, 1, 0, 1, 0, 1})
	binWeights := f(1, 2, 3, 4, 5, 6) // tp 1+4 = 5, fp 2+6 = 8, fn 3, tn 5

	// Scores: positives at 0.95 and 0.35, negatives at 0.85 and 0.15.
	scoreLabels := vec([]bool{true, false, true, false})
	scores := f(0.95, 0.85, 0.35, 0.15)

	// Classifier scores, 4 examples × 3 classes, and their labels:
	//   ex0 [0.1 0.7 0.2] label 1: rank 0 (top-1 hit, top-2 hit)
	//   ex1 [0.5 0.3 0.2] label 1: rank 1 (top-1 miss, top-2 hit)
	//   ex2 [0.2 0.3 0.5] label 0: rank 2 (miss, miss)
	//   ex3 [0.4 0.4 0.2] label 1: tied with class 0, which has the lower
	//       index and comes first, so rank 1 (top-1 miss, top-2 hit).
	clsScores := mat([]float64{
		0.1, 0.7, 0.2,
		0.5, 0.3, 0.2,
		0.2, 0.3, 0.5,
		0.4, 0.4, 0.2,
	}, 4, 3)
	clsLabels := vec([]int64{1, 1, 0, 1})

	tests := []struct {
		name      string
		newMetric func() Metric
		batches   [][]*tensor.Dense
		want      float64
		wantState []float64          // nil: not checked
		wantMulti map[string]float64 // nil: not checked
	}{
		{
			// Errors 0,1,2,-4: squares 0+1+4+16 = 21 over 4.
			name:      "mse",
			newMetric: NewMeanSquaredError,
			batches:   [][]*tensor.Dense{ts(f(1, 2, 3, 4), f(1, 3, 5, 0))},
			want:      5.25,
			wantState: []float64{21, 4},
		},
		{
			// Squares 0,1,4,16 weighted 1,2,0,1: (0+2+0+16) / (1+2+0+1) = 18/4.
			name:      "mse weighted",
			newMetric: NewMeanSquaredError,
			batches:   [][]*tensor.Dense{ts(f(1, 2, 3, 4), f(1, 3, 5, 0), f(1, 2, 0, 1))},
			want:      4.5,
			wantState: []float64{18, 4},
		},
		{
			// Errors ±2 everywhere: mean square 16/4 = 4, root 2.
			name:      "rmse",
			newMetric: NewRootMeanSquaredError,
			batches:   [][]*tensor.Dense{ts(vec([]int32{1, 2, 3, 4}), f(3, 0, 5, 2))},
			want:      2,
			wantState: []float64{16, 4},
		},
		{
			// Errors 0 and 4 weighted 3 and 1: (0+16) / (3+1) = 4, root 2.
			// Streaming: the same in two batches.
			name:      "rmse weighted streaming",
			newMetric: NewRootMeanSquaredError,
			batches: [][]*tensor.Dense{
				ts(f(1), f(1), f(3)),
				ts(f(1), f(5), f(1)),
			},
			want:      2,
			wantState: []float64{16, 4},
		},
		{
			name:      "rmse no data",
			newMetric: NewRootMeanSquaredError,
			want:      0,
			wantState: []float64{0, 0},
		},
		{
			// |2-1|+|2-2|+|1-3|+|8-4| = 1+0+2+4 = 7 over 4.
			name:      "mae",
			newMetric: NewMeanAbsoluteError,
			batches:   [][]*tensor.Dense{ts(f(1, 2, 3, 4), f(2, 2, 1, 8))},
			want:      1.75,
			wantState: []float64{7, 4},
		},
		{
			// Absolute errors [[0,2],[0,4]], row weights [3,1] broadcast
			// over the columns: (0*3+2*3 + 0*1+4*1) / (3+3+1+1) = 10/8.
			name:      "mae row weights",
			newMetric: NewMeanAbsoluteError,
			batches: [][]*tensor.Dense{ts(mat([]float64{1, 2, 3, 4}, 2, 2), mat([]float64{1, 0, 3, 0}, 2, 2),
				f(3, 1))},
			want:      1.25,
			wantState: []float64{10, 8},
		},
		{
			// tp 2, fp 2: 2/4.
			name:      "precision",
			newMetric: NewPrecision,
			batches:   [][]*tensor.Dense{ts(binLabels, binPreds)},
			want:      0.5,
			wantState: []float64{2, 2},
		},
		{
			// tp 1+4 = 5, fp 2+6 = 8: 5/13.
			name:      "precision weighted",
			newMetric: NewPrecision,
			batches:   [][]*tensor.Dense{ts(binLabels, binPreds, binWeights)},
			want:      5.0 / 13,
			wantState: []float64{5, 8},
		},
		{
			// No positive prediction: tp + fp = 0, and TF's precision is 0.
			name:      "precision no positive predictions",
			newMetric: NewPrecision,
			batches:   [][]*tensor.Dense{ts(f(1, 1, 0), f(0, 0, 0))},
			want:      0,
			wantState: []float64{0, 0},
		},
		{
			// Predictions cast to bool, not thresholded at 0.5: 0.3 and -1
			// are true. Labels [T,F,F,T] vs [T,F,T,F]: tp at 0, fp at 2.
			name:      "precision casts predictions to bool",
			newMetric: NewPrecision,
			batches:   [][]*tensor.Dense{ts(vec([]bool{true, false, false, true}), f(0.3, 0, -1, 0))},
			want:      0.5,
			wantState: []float64{1, 1},
		},
		{
			// tp 2, fn 1: 2/3.
			name:      "recall",
			newMetric: NewRecall,
			batches:   [][]*tensor.Dense{ts(binLabels, binPreds)},
			want:      2.0 / 3,
			wantState: []float64{2, 1},
		},
		{
			// tp 5, fn 3: 5/8.
			name:      "recall weighted",
			newMetric: NewRecall,
			batches:   [][]*tensor.Dense{ts(binLabels, binPreds, binWeights)},
			want:      5.0 / 8,
			wantState: []float64{5, 3},
		},
		{
			// No positive label: tp + fn = 0, recall 0.
			name:      "recall no positive labels",
			newMetric: NewRecall,
			batches:   [][]*tensor.Dense{ts(f(0, 0), f(1, 0))},
			want:      0,
			wantState: []float64{0, 0},
		},
		{name: "true positives", newMetric: NewTruePositives, batches: [][]*tensor.Dense{ts(binLabels, binPreds)}, want: 2, wantState: []float64{2}},
		{name: "false positives", newMetric: NewFalsePositives, batches: [][]*tensor.Dense{ts(binLabels, binPreds)}, want: 2, wantState: []float64{2}},
		{name: "true negatives", newMetric: NewTrueNegatives, batches: [][]*tensor.Dense{ts(binLabels, binPreds)}, want: 1, wantState: []float64{1}},
		{name: "false negatives", newMetric: NewFalseNegatives, batches: [][]*tensor.Dense{ts(binLabels, binPreds)}, want: 1, wantState: []float64{1}},
		{name: "true positives weighted", newMetric: NewTruePositives, batches: [][]*tensor.Dense{ts(binLabels, binPreds, binWeights)}, want: 5},
		{name: "false positives weighted", newMetric: NewFalsePositives, batches: [][]*tensor.Dense{ts(binLabels, binPreds, binWeights)}, want: 8},
		{name: "true negatives weighted", newMetric: NewTrueNegatives, batches: [][]*tensor.Dense{ts(binLabels, binPreds, binWeights)}, want: 5},
		{name: "false negatives weighted", newMetric: NewFalseNegatives, batches: [][]*tensor.Dense{ts(binLabels, binPreds, binWeights)}, want: 3},
		{
			// Scalar weight 2 doubles the count: 2 true positives × 2.
			name:      "true positives scalar weight",
			newMetric: NewTruePositives,
			batches:   [][]*tensor.Dense{ts(binLabels, binPreds, scalar(2.0))},
			want:      4,
		},
		{
			// Above 0.5: 0.95 (pos), 0.85 (neg): tp 1, fp 1, 1/2.
			// Above 0.2: 0.95, 0.85, 0.35: tp 2, fp 1, 2/3.
			// Above 0.9: 0.95: tp 1, fp 0, 1/1.
			// Each divided by (1e-7 + tp + fp). Result: the first, 0.5.
			name:      "precision at thresholds",
			newMetric: precAt(0.5, 0.2, 0.9),
			batches:   [][]*tensor.Dense{ts(scoreLabels, scores)},
			want:      0.5,
			wantState: []float64{1, 2, 1, 1, 1, 0},
			wantMulti: map[string]float64{"threshold_0.5": 0.5, "threshold_0.2": 2.0 / 3, "threshold_0.9": 1},
		},
		{
			// Positives 0.95 and 0.35. Above 0.5: tp 1, fn 1 (0.35), 1/2;
			// above 0.2: tp 2, fn 0, 1; above 0.9: tp 1, fn 1, 1/2.
			name:      "recall at thresholds",
			newMetric: recAt(0.5, 0.2, 0.9),
			batches:   [][]*tensor.Dense{ts(scoreLabels, scores)},
			want:      0.5,
			wantState: []float64{1, 2, 1, 1, 0, 1},
			wantMulti: map[string]float64{"threshold_0.5": 0.5, "threshold_0.2": 1, "threshold_0.9": 0.5},
		},
		{
			// Weights [2,1,1,1] at 0.5: tp 2 (0.95), fp 1 (0.85): 2/3.
			name:      "precision at thresholds weighted",
			newMetric: precAt(0.5),
			batches:   [][]*tensor.Dense{ts(scoreLabels, scores, f(2, 1, 1, 1))},
			want:      2.0 / 3,
			wantState: []float64{2, 1},
		},
		{
			// A prediction equal to the threshold is not above it (TF's
			// strict greater): the positive 0.5 is a false negative at 0.5,
			// a true positive at 0.25. Nothing is above 1: precision 0/1e-7.
			name:      "at thresholds on a threshold",
			newMetric: recAt(0.5, 0.25, 1),
			batches:   [][]*tensor.Dense{ts(f(1), f(0.5))},
			want:      0,
			wantState: []float64{0, 1, 0, 1, 0, 1},
			wantMulti: map[string]float64{"threshold_0.5": 0, "threshold_0.25": 1, "threshold_1": 0},
		},
		{
			name:      "precision at thresholds no data",
			newMetric: precAt(0.5, 0.75),
			want:      0,
			wantState: []float64{0, 0, 0, 0},
			wantMulti: map[string]float64{"threshold_0.5": 0, "threshold_0.75": 0},
		},
		{
			// 4 classes; class 3 is in neither labels nor predictions.
			// labels [0,0,1,1,2,2], predictions [0,1,1,1,2,0]; confusion
			// rows (label) × columns (prediction):
			//   0: [1 1 0 0]   1: [0 2 0 0]   2: [1 0 1 0]   3: [0 0 0 0]
			// class 0: diag 1, row 2, col 2: 1/(2+2-1) = 1/3
			// class 1: diag 2, row 2, col 3: 2/(2+3-2) = 2/3
			// class 2: diag 1, row 2, col 1: 1/(2+1-1) = 1/2
			// class 3: denominator 0, left out of the mean.
			// mean over 3 classes: (1/3 + 2/3 + 1/2) / 3 = 0.5.
			name:      "mean iou with an absent class",
			newMetric: iou(4),
			batches:   [][]*tensor.Dense{ts(vec([]int{0, 0, 1, 1, 2, 2}), vec([]int{0, 1, 1, 1, 2, 0}))},
			want:      0.5,
			wantState: []float64{1, 1, 0, 0, 0, 2, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0},
		},
		{
			// labels [0,1,1], predictions [0,1,0], weights [1,2,3]: rows
			// 0: [1 0], 1: [3 2]. class 0: 1/(1+4-1) = 1/4; class 1:
			// 2/(5+2-2) = 2/5; mean (0.25+0.4)/2 = 0.325.
			name:      "mean iou weighted",
			newMetric: iou(2),
			batches:   [][]*tensor.Dense{ts(vec([]int64{0, 1, 1}), vec([]int64{0, 1, 0}), f(1, 2, 3))},
			want:      0.325,
			wantState: []float64{1, 0, 3, 2},
		},
		{
			// labels [0,0], predictions [0,2]: class 0: 1/(2+1-1) = 1/2;
			// class 1 absent (left out); class 2 only predicted: 0/(0+1-0)
			// = 0, counted. Mean (1/2 + 0) / 2.
			name:      "mean iou class only predicted",
			newMetric: iou(3),
			batches:   [][]*tensor.Dense{ts(vec([]int{0, 0}), vec([]int{0, 2}))},
			want:      0.25,
			wantState: []float64{1, 0, 1, 0, 0, 0, 0, 0, 0},
		},
		{
			// Float and bool class ids: float32 [1,0] vs bool [true,false]
			// (1, 0): both classes perfect, mean 1.
			name:      "mean iou float and bool ids",
			newMetric: iou(2),
			batches:   [][]*tensor.Dense{ts(vec([]float32{1, 0}), vec([]bool{true, false}))},
			want:      1,
			wantState: []float64{1, 0, 0, 1},
		},
		{
			name:      "mean iou no data",
			newMetric: iou(3),
			want:      0,
			wantState: make([]float64, 9),
		},
		{
			// k=1: only ex0 hits: 1/4.
			name:      "recall at k=1",
			newMetric: recK(1),
			batches:   [][]*tensor.Dense{ts(clsLabels, clsScores)},
			want:      0.25,
			wantState: []float64{1, 3},
		},
		{
			// k=2: ex0, ex1, ex3 hit, ex2 misses: 3/4.
			name:      "recall at k=2",
			newMetric: recK(2),
			batches:   [][]*tensor.Dense{ts(clsLabels, clsScores)},
			want:      0.75,
			wantState: []float64{3, 1},
		},
		{
			// k=2, weights [1,2,3,4]: tp 1+2+4 = 7, fn 3: 7/10.
			name:      "recall at k=2 weighted",
			newMetric: recK(2),
			batches:   [][]*tensor.Dense{ts(clsLabels, clsScores, f(1, 2, 3, 4))},
			want:      0.7,
			wantState: []float64{7, 3},
		},
		{
			// Labels of shape [batch, 1] and float32 scores, same as k=1.
			name:      "recall at k=1 column labels",
			newMetric: recK(1),
			batches: [][]*tensor.Dense{ts(mat([]int32{1, 1, 0, 1}, 4, 1), mat([]float32{
				0.1, 0.7, 0.2,
				0.5, 0.3, 0.2,
				0.2, 0.3, 0.5,
				0.4, 0.4, 0.2,
			}, 4, 3))},
			want:      0.25,
			wantState: []float64{1, 3},
		},
		{
			// The tie in ex3 favours class 0 (lower index): label 0 is a
			// top-1 hit, label 1 a miss.
			name:      "recall at k=1 tie goes to the lower index",
			newMetric: recK(1),
			batches:   [][]*tensor.Dense{ts(vec([]int{0, 1}), mat([]float64{0.4, 0.4, 0.2, 0.4, 0.4, 0.2}, 2, 3))},
			want:      0.5,
			wantState: []float64{1, 1},
		},
		{
			// Labels 3 and -1 are outside [0, 3): misses even with k = 3,
			// as TF ("always count towards false_negative_at_<k>").
			name:      "recall at k out-of-range labels",
			newMetric: recK(3),
			batches:   [][]*tensor.Dense{ts(vec([]int{3, -1, 2}), mat([]float64{0.9, 0.1, 0, 0.9, 0.1, 0, 0.9, 0.1, 0}, 3, 3))},
			want:      1.0 / 3,
			wantState: []float64{1, 2},
		},
		{
			// Before any example tp + fn = 0: 0 (TF would give NaN).
			name:      "recall at k no data",
			newMetric: recK(1),
			batches:   [][]*tensor.Dense{ts(vec([]int{}), mat([]float64{}, 0, 3))},
			want:      0,
			wantState: []float64{0, 0},
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
			if tc.wantMulti != nil {
				mr, ok := m.(MultiResult)
				if !ok {
					t.Fatalf("%T is not a MultiResult", m)
				}
				if d := cmp.Diff(tc.wantMulti, mr.Results(), approxResult); d != "" {
					t.Errorf("Results() mismatch (-want +got):\n%s", d)
				}
			}
		})
	}
}

func TestAtThresholdsValues(t *testing.T) {
	in := []float64{0.5, 0.2, 0.9}
	m := must(NewPrecisionAtThresholds(in)).(*atThresholds)
	in[0] = 0.7 // the metric keeps its own copy
	if err := m.Update(ts(vec([]bool{true, false, true, false}), vec([]float64{0.95, 0.85, 0.35, 0.15}))); err != nil {
		t.Fatal(err)
	}
	// As in TestKnownValuesTF, tp / (1e-7 + tp + fp) with tp, fp = 1, 1;
	// 2, 1; 1, 0.
	want := []float64{1 / (1e-7 + 1 + 1), 2 / (1e-7 + 2 + 1), 1 / (1e-7 + 1 + 0)}
	if d := cmp.Diff(want, m.values(), approxState); d != "" {
		t.Errorf("values() (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]float64{0.5, 0.2, 0.9}, m.thresholds); d != "" {
		t.Errorf("thresholds (-want +got):\n%s", d)
	}
	if m.Result() != m.values()[0] {
		t.Errorf("Result() = %v, want the first value %v", m.Result(), m.values()[0])
	}
	r := must(NewRecallAtThresholds([]float64{0.25})).(*atThresholds)
	if d := cmp.Diff([]float64{0}, r.values()); d != "" {
		t.Errorf("zero recall values() (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]float64{0.25}, r.thresholds); d != "" {
		t.Errorf("recall thresholds (-want +got):\n%s", d)
	}
}

func TestMeanIoUClasses(t *testing.T) {
	m := must(NewMeanIoU(3)).(*meanIoUMetric)
	if err := m.Update(ts(vec([]int{0, 0}), vec([]int{0, 2}))); err != nil {
		t.Fatal(err)
	}
	// The confusion matrix, row-major, rows by label.
	if d := cmp.Diff([]float64{1, 0, 1, 0, 0, 0, 0, 0, 0}, m.State()); d != "" {
		t.Errorf("State() (-want +got):\n%s", d)
	}
	iou, counted := m.classIoU()
	if d := cmp.Diff([]float64{0.5, 0, 0}, iou); d != "" {
		t.Errorf("classIoU() (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bool{true, false, true}, counted); d != "" {
		t.Errorf("classIoU() counted (-want +got):\n%s", d)
	}
}

func TestKinds(t *testing.T) {
	tests := []struct {
		m        Metric
		kind     string
		stateLen int
	}{
		{NewMeanSquaredError(), "mean_squared_error", 2},
		{NewRootMeanSquaredError(), "root_mean_squared_error", 2},
		{NewMeanAbsoluteError(), "mean_absolute_error", 2},
		{NewPrecision(), "precision", 2},
		{NewRecall(), "recall", 2},
		{NewTruePositives(), "true_positives", 1},
		{NewFalsePositives(), "false_positives", 1},
		{NewTrueNegatives(), "true_negatives", 1},
		{NewFalseNegatives(), "false_negatives", 1},
		{must(NewPrecisionAtThresholds([]float64{0.5, 0.25, 1e-7})), "precision_at_thresholds(0.5,0.25,1e-07)", 6},
		{must(NewRecallAtThresholds([]float64{0.1})), "recall_at_thresholds(0.1)", 2},
		{must(NewMeanIoU(3)), "mean_iou(num_classes=3)", 9},
		{must(NewRecallAtK(5)), "recall_at_k(k=5)", 2},
	}
	for _, tc := range tests {
		if got := tc.m.Kind(); got != tc.kind {
			t.Errorf("Kind() = %q, want %q", got, tc.kind)
		}
		if got := len(tc.m.State()); got != tc.stateLen {
			t.Errorf("%s: len(State()) = %d, want %d", tc.kind, got, tc.stateLen)
		}
	}
}

func TestConstructorErrors(t *testing.T) {
	tests := []struct {
		name string
		new  func() (Metric, error)
		want []string
	}{
		{"auc 1 threshold", func() (Metric, error) { return NewAUC(NumThresholds(1)) }, []string{"metrics.NewAUC", "NumThresholds must be at least 2, got 1"}},
		{"auc bad curve", func() (Metric, error) { return NewAUC(Curve(CurveKind(7))) }, []string{"curve must be ROC or PR, got CurveKind(7)"}},
		{"precision no thresholds", func() (Metric, error) { return NewPrecisionAtThresholds(nil) }, []string{"metrics.NewPrecisionAtThresholds", "thresholds must not be empty"}},
		{"precision NaN threshold", func() (Metric, error) { return NewPrecisionAtThresholds([]float64{0.5, math.NaN()}) }, []string{"threshold 1 is NaN"}},
		{"recall no thresholds", func() (Metric, error) { return NewRecallAtThresholds([]float64{}) }, []string{"metrics.NewRecallAtThresholds", "empty"}},
		{"recall duplicate threshold", func() (Metric, error) { return NewRecallAtThresholds([]float64{0.5, 0.1, 0.5}) }, []string{"thresholds 0 and 2 are both 0.5"}},
		{"mean iou 0 classes", func() (Metric, error) { return NewMeanIoU(0) }, []string{"metrics.NewMeanIoU", "numClasses must be at least 1, got 0"}},
		{"mean iou negative classes", func() (Metric, error) { return NewMeanIoU(-3) }, []string{"got -3"}},
		{"mean iou huge", func() (Metric, error) { return NewMeanIoU(1 << 40) }, []string{"too large"}},
		{"recall at k 0", func() (Metric, error) { return NewRecallAtK(0) }, []string{"metrics.NewRecallAtK", "k must be at least 1, got 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.new()
			if err == nil {
				t.Fatalf("succeeded with %s, want an error", m.Kind())
			}
			if m != nil {
				t.Errorf("metric %v returned with error %v, want nil", m, err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestBoundErr(t *testing.T) {
	x := vectors(2, "x")[0]
	tests := []struct {
		name     string
		b        Bound
		wantKind string
		want     []string
	}{
		{"accuracy nil labels", Accuracy(nil, x), "invalid(Accuracy)", []string{"metrics.Accuracy", "labels node (input 0) is nil"}},
		{"accuracy nil predictions", Accuracy(x, nil), "invalid(Accuracy)", []string{"predictions node (input 1) is nil"}},
		{"mean nil values", Mean(nil), "invalid(Mean)", []string{"metrics.Mean", "values node (input 0) is nil"}},
		{"auc 1 threshold", AUC(x, x, NumThresholds(1)), "invalid(AUC)", []string{"metrics.AUC", "NumThresholds must be at least 2, got 1"}},
		{"auc bad curve", AUC(x, x, Curve(CurveKind(7))), "invalid(AUC)", []string{"curve must be ROC or PR, got CurveKind(7)"}},
		{"auc nil node", AUC(nil, x), "invalid(AUC)", []string{"labels node"}},
		{"mse nil", MeanSquaredError(x, nil), "invalid(MeanSquaredError)", []string{"metrics.MeanSquaredError", "predictions node"}},
		{"rmse nil", RootMeanSquaredError(nil, x), "invalid(RootMeanSquaredError)", []string{"labels node"}},
		{"mae nil", MeanAbsoluteError(nil, nil), "invalid(MeanAbsoluteError)", []string{"labels node"}},
		{"precision nil", Precision(nil, x), "invalid(Precision)", []string{"metrics.Precision", "labels node"}},
		{"recall nil", Recall(x, nil), "invalid(Recall)", []string{"metrics.Recall", "predictions node"}},
		{"tp nil", TruePositives(nil, x), "invalid(TruePositives)", []string{"metrics.TruePositives"}},
		{"fp nil", FalsePositives(nil, x), "invalid(FalsePositives)", []string{"metrics.FalsePositives"}},
		{"tn nil", TrueNegatives(nil, x), "invalid(TrueNegatives)", []string{"metrics.TrueNegatives"}},
		{"fn nil", FalseNegatives(nil, x), "invalid(FalseNegatives)", []string{"metrics.FalseNegatives"}},
		{"precision at no thresholds", PrecisionAtThresholds(x, x, nil), "invalid(PrecisionAtThresholds)", []string{"metrics.PrecisionAtThresholds", "thresholds must not be empty"}},
		{"precision at nil node", PrecisionAtThresholds(nil, x, []float64{0.5}), "invalid(PrecisionAtThresholds)", []string{"labels node"}},
		{"recall at duplicate", RecallAtThresholds(x, x, []float64{0.5, 0.5}), "invalid(RecallAtThresholds)", []string{"metrics.RecallAtThresholds", "both 0.5"}},
		{"mean iou 0 classes", MeanIoU(x, x, 0), "invalid(MeanIoU)", []string{"metrics.MeanIoU", "numClasses must be at least 1, got 0"}},
		{"mean iou nil node", MeanIoU(x, nil, 3), "invalid(MeanIoU)", []string{"predictions node"}},
		{"recall at k 0", RecallAtK(x, x, 0), "invalid(RecallAtK)", []string{"metrics.RecallAtK", "k must be at least 1, got 0"}},
		{"recall at k nil node", RecallAtK(nil, x, 1), "invalid(RecallAtK)", []string{"labels node"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			if b.Err == nil {
				t.Fatal("Bound.Err is nil, want an error")
			}
			for _, s := range tc.want {
				if !strings.Contains(b.Err.Error(), s) {
					t.Errorf("Bound.Err %q does not contain %q", b.Err, s)
				}
			}
			if b.Inputs != nil {
				t.Errorf("Inputs = %v, want nil", b.Inputs)
			}
			if b.New == nil {
				t.Fatal("New is nil")
			}
			m := b.New()
			if m == nil {
				t.Fatal("New() returned nil")
			}
			if got := b.Kind(); got != tc.wantKind {
				t.Errorf("Kind() = %q, want %q", got, tc.wantKind)
			}
			if len(m.State()) != 0 {
				t.Errorf("State() = %v, want empty", m.State())
			}
			if r := m.Result(); !math.IsNaN(r) {
				t.Errorf("Result() = %v, want NaN", r)
			}
			if err := m.Update(ts(vec([]float64{1}), vec([]float64{1}))); !errors.Is(err, b.Err) {
				t.Errorf("New().Update() = %v, want Bound.Err", err)
			}
			if err := b.Update(m); !errors.Is(err, b.Err) {
				t.Errorf("Bound.Update() = %v, want Bound.Err", err)
			}
			// Invalid metrics merge and reduce like any other (of no state).
			if err := Merge(m, b.New()); err != nil {
				t.Errorf("Merge of two invalid metrics: %v", err)
			}
		})
	}
}

func TestUpdateErrorsTF(t *testing.T) {
	f := func(v ...float64) *tensor.Dense { return vec(v) }
	precAt := func() Metric { return must(NewPrecisionAtThresholds([]float64{0.5})) }
	recAt := func() Metric { return must(NewRecallAtThresholds([]float64{0.5, 0.7})) }
	iou3 := func() Metric { return must(NewMeanIoU(3)) }
	recK := func(k int) func() Metric { return func() Metric { return must(NewRecallAtK(k)) } }
	scores := mat([]float64{0.1, 0.9, 0.8, 0.2}, 2, 2)
	tests := []struct {
		name   string
		metric func() Metric
		inputs []*tensor.Dense
		want   []string
	}{
		{"mse one input", NewMeanSquaredError, ts(f(1)), []string{"mean_squared_error", "got 1 inputs", "want 2 (labels, predictions)"}},
		{"rmse size mismatch", NewRootMeanSquaredError, ts(f(1, 2), mat([]float64{1}, 1)), []string{"root_mean_squared_error", "labels of shape (2)", "predictions of shape (1)"}},
		{"mae weights", NewMeanAbsoluteError, ts(f(1, 2), f(1, 2), f(1, 2, 3)), []string{"mean_absolute_error", "weights of shape (3)"}},
		{"precision three inputs missing", NewPrecision, ts(f(1)), []string{"precision", "got 1 inputs"}},
		{"recall size mismatch", NewRecall, ts(f(1, 0, 1), f(1)), []string{"recall", "differ in size"}},
		{"false negatives bad dtype", NewFalseNegatives, ts(f(1), vec([]string{"x"})), []string{"false_negatives", "predictions (input 1)", "unsupported"}},
		{"precision at prediction above 1", precAt, ts(f(1, 0), f(0.5, 1.5)), []string{"precision_at_thresholds(0.5)", "predictions must be in [0, 1]", "element 1", "1.5"}},
		{"recall at NaN prediction", recAt, ts(f(1), f(math.NaN())), []string{"recall_at_thresholds(0.5,0.7)", "NaN"}},
		{"recall at size mismatch", recAt, ts(f(1, 1), f(0.5)), []string{"differ in size"}},
		{"mean iou label out of range", iou3, ts(vec([]int{0, 3}), vec([]int{0, 1})), []string{"mean_iou(num_classes=3)", "labels element 1", "is 3", "outside the class ids [0, 3)"}},
		{"mean iou negative prediction", iou3, ts(vec([]int{0, 1}), vec([]int{-1, 1})), []string{"predictions element 0", "is -1", "outside"}},
		{"mean iou fractional label", iou3, ts(f(0, 1.5), f(0, 1)), []string{"labels element 1", "1.5", "not an integer class id"}},
		{"mean iou NaN prediction", iou3, ts(f(0), f(math.NaN())), []string{"predictions element 0", "NaN", "not an integer"}},
		{"mean iou size mismatch", iou3, ts(vec([]int{0, 1}), vec([]int{0})), []string{"differ in size"}},
		{"mean iou weights", iou3, ts(vec([]int{0, 1}), vec([]int{0, 1}), f(1, 2, 3)), []string{"weights of shape (3)"}},
		{"recall at k vector predictions", recK(1), ts(vec([]int{0}), f(0.1, 0.9)), []string{"recall_at_k(k=1)", "predictions must be scores of shape [batch, num_classes]", "(2)"}},
		{"recall at k too few labels", recK(1), ts(mat([]int{0}, 1), scores), []string{"labels of shape (1)", "one class id per example", "predictions of shape (2, 2)"}},
		{"recall at k multi-label", recK(1), ts(mat([]int{0, 1, 1, 0}, 2, 2), scores), []string{"labels of shape (2, 2)", "one class id per example"}},
		{"recall at k exceeds classes", recK(3), ts(vec([]int{0, 1}), scores), []string{"k=3 exceeds the 2 classes", "(2, 2)"}},
		{"recall at k fractional label", recK(1), ts(f(0, 0.5), scores), []string{"labels element 1", "0.5", "not an integer class id"}},
		{"recall at k NaN score", recK(1), ts(vec([]int{0, 1}), mat([]float64{0.1, math.NaN(), 0.8, 0.2}, 2, 2)), []string{"predictions element 1", "NaN"}},
		{"recall at k weights per class", recK(1), ts(vec([]int{0, 1}), scores, mat([]float64{1, 1, 1, 1}, 2, 2)), []string{"weights of shape (2, 2)", "shape (2)"}},
		{"recall at k one input", recK(1), ts(scores), []string{"got 1 inputs"}},
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

func TestResultsMultiResult(t *testing.T) {
	p := must(NewPrecisionAtThresholds([]float64{0.5, 0.9}))
	copy(p.State(), []float64{1, 3, 1, 0}) // tp [1,3], fp [1,0]
	shadow := NewMean()
	copy(shadow.State(), []float64{7, 1})
	got := Results(map[string]Metric{
		"p":               p,
		"p/threshold_0.9": shadow, // a metric of that name wins over the expansion
		"recall":          NewRecall(),
	})
	want := map[string]float64{
		"p":               1 / (1e-7 + 1 + 1),
		"p/threshold_0.5": 1 / (1e-7 + 1 + 1),
		"p/threshold_0.9": 7,
		"recall":          0,
	}
	if d := cmp.Diff(want, got, approxState); d != "" {
		t.Errorf("Results (-want +got):\n%s", d)
	}
}

// TestBoundTF checks the bound constructors of the new metrics: inputs,
// kinds, and that Bound.Update reads the nodes' values as Update would.
func TestBoundTF(t *testing.T) {
	g := G.NewGraph()
	labels := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("labels"))
	preds := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("preds"))
	w := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("w"))
	ids := G.NewVector(g, G.Int, G.WithShape(4), G.WithName("ids"))
	scores := G.NewMatrix(g, G.Float32, G.WithShape(4, 3), G.WithName("scores"))
	vals := map[*G.Node]*tensor.Dense{
		labels: vec([]float64{1, 0, 1, 0}),
		preds:  vec([]float64{1, 0, 0, 0.5}),
		w:      vec([]float64{1, 2, 3, 4}),
		ids:    vec([]int{0, 2, 1, 1}),
		scores: mat([]float32{0.1, 0.7, 0.2, 0.5, 0.3, 0.2, 0.2, 0.3, 0.5, 0.4, 0.4, 0.2}, 4, 3),
	}
	tests := []struct {
		name       string
		b          Bound
		wantKind   string
		wantInputs []*G.Node
	}{
		{"mse", MeanSquaredError(labels, preds), "mean_squared_error", []*G.Node{labels, preds}},
		{"rmse weighted", RootMeanSquaredError(labels, preds, Weights(w)), "root_mean_squared_error", []*G.Node{labels, preds, w}},
		{"mae", MeanAbsoluteError(labels, preds), "mean_absolute_error", []*G.Node{labels, preds}},
		{"precision", Precision(labels, preds, Weights(w)), "precision", []*G.Node{labels, preds, w}},
		{"recall", Recall(labels, preds), "recall", []*G.Node{labels, preds}},
		{"tp", TruePositives(labels, preds), "true_positives", []*G.Node{labels, preds}},
		{"fp", FalsePositives(labels, preds), "false_positives", []*G.Node{labels, preds}},
		{"tn", TrueNegatives(labels, preds), "true_negatives", []*G.Node{labels, preds}},
		{"fn", FalseNegatives(labels, preds, Weights(w)), "false_negatives", []*G.Node{labels, preds, w}},
		{"precision at", PrecisionAtThresholds(labels, preds, []float64{0.5, 0.25}), "precision_at_thresholds(0.5,0.25)", []*G.Node{labels, preds}},
		{"recall at weighted", RecallAtThresholds(labels, preds, []float64{0.5}, Weights(w)), "recall_at_thresholds(0.5)", []*G.Node{labels, preds, w}},
		{"mean iou", MeanIoU(ids, ids, 3), "mean_iou(num_classes=3)", []*G.Node{ids, ids}},
		{"mean iou weighted", MeanIoU(ids, ids, 3, Weights(w)), "mean_iou(num_classes=3)", []*G.Node{ids, ids, w}},
		{"recall at k", RecallAtK(ids, scores, 2), "recall_at_k(k=2)", []*G.Node{ids, scores}},
		{"recall at k weighted", RecallAtK(ids, scores, 1, Weights(w)), "recall_at_k(k=1)", []*G.Node{ids, scores, w}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkBound(t, tc.b, tc.wantKind, tc.wantInputs, vals)
		})
	}
}

func TestBoundCopiesThresholds(t *testing.T) {
	g := G.NewGraph()
	x := G.NewVector(g, G.Float64, G.WithShape(2), G.WithName("x"))
	th := []float64{0.5, 0.75}
	b := PrecisionAtThresholds(x, x, th)
	th[0] = 0.1
	if got, want := b.Kind(), "precision_at_thresholds(0.5,0.75)"; got != want {
		t.Errorf("Kind() after changing the caller's slice = %q, want %q", got, want)
	}
}
