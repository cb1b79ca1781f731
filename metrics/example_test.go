package metrics_test

import (
	"fmt"
	"log"
	"sort"

	"github.com/towerflow/towerflow/metrics"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func ExampleNewAccuracy() {
	m := metrics.NewAccuracy()
	labels := tensor.New(tensor.WithBacking([]int64{1, 2, 3, 4}))
	preds := tensor.New(tensor.WithBacking([]int64{1, 2, 0, 4}))
	if err := m.Update([]*tensor.Dense{labels, preds}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Kind(), m.State(), m.Result())
	// Output: accuracy [3 4] 0.75
}

func ExampleNewMean() {
	// Row weights broadcast over the trailing dimension:
	// (1+2)*1 + (3+4)*3 = 24 over 2*1 + 2*3 = 8.
	m := metrics.NewMean()
	values := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4}))
	weights := tensor.New(tensor.WithBacking([]float32{1, 3}))
	if err := m.Update([]*tensor.Dense{values, weights}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.State(), m.Result())
	// Output: [24 8] 3
}

func ExampleNewAUC() {
	roc, err := metrics.NewAUC(metrics.NumThresholds(11))
	if err != nil {
		log.Fatal(err)
	}
	pr, err := metrics.NewAUC(metrics.NumThresholds(11), metrics.Curve(metrics.PR))
	if err != nil {
		log.Fatal(err)
	}
	labels := tensor.New(tensor.WithBacking([]bool{true, false, true, false}))
	preds := tensor.New(tensor.WithBacking([]float32{0.95, 0.85, 0.35, 0.15}))
	for _, m := range []metrics.Metric{roc, pr} {
		if err := m.Update([]*tensor.Dense{labels, preds}); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %.4f\n", m.Kind(), m.Result())
	}
	// Output:
	// auc(curve=ROC,thresholds=11): 0.7500
	// auc(curve=PR,thresholds=11): 0.7917
}

func ExampleReduceIntoFirst() {
	// Two towers, each with its own accuracy over its shard of the batch.
	towers := []map[string]metrics.Metric{
		{"accuracy": metrics.NewAccuracy()},
		{"accuracy": metrics.NewAccuracy()},
	}
	shards := [][2][]int{
		{{1, 0, 1}, {1, 0, 0}}, // 2 of 3 right
		{{0, 1}, {0, 1}},       // 2 of 2 right
	}
	for i, s := range shards {
		labels := tensor.New(tensor.WithBacking(s[0]))
		preds := tensor.New(tensor.WithBacking(s[1]))
		if err := towers[i]["accuracy"].Update([]*tensor.Dense{labels, preds}); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 { // idempotent
		if err := metrics.ReduceIntoFirst(towers); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(metrics.String(metrics.Results(towers[0])))
	fmt.Println(towers[0]["accuracy"].State(), towers[1]["accuracy"].State())
	// Output:
	// accuracy=0.8
	// [4 5] [0 0]
}

func ExampleBound_Update() {
	// A model function binds metrics to its graph's nodes.
	g := G.NewGraph()
	logits := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("logits"))
	labels := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("labels"))
	probs := G.Must(G.Sigmoid(logits))
	bound := map[string]metrics.Bound{
		"auc":       metrics.AUC(labels, probs),
		"mean_prob": metrics.Mean(probs),
	}

	// Each eval step runs the graph, then updates the metrics in Go.
	ms := map[string]metrics.Metric{}
	for name, b := range bound {
		ms[name] = b.New()
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	steps := []struct{ logits, labels []float64 }{
		{[]float64{-2, 3, 0.5, -1}, []float64{0, 1, 1, 0}},
		{[]float64{1, -3, 2, 0}, []float64{1, 0, 1, 0}},
	}
	for _, s := range steps {
		G.Let(logits, tensor.New(tensor.WithBacking(s.logits)))
		G.Let(labels, tensor.New(tensor.WithBacking(s.labels)))
		if err := vm.RunAll(); err != nil {
			log.Fatal(err)
		}
		for name, b := range bound {
			if err := b.Update(ms[name]); err != nil {
				log.Fatal(err)
			}
		}
		vm.Reset()
	}
	fmt.Printf("%.4f %.4f\n", ms["auc"].Result(), ms["mean_prob"].Result())
	// Output: 1.0000 0.5153
}

func ExampleNewPrecisionAtThresholds() {
	m, err := metrics.NewPrecisionAtThresholds([]float64{0.5, 0.2, 0.9})
	if err != nil {
		log.Fatal(err)
	}
	labels := tensor.New(tensor.WithBacking([]bool{true, false, true, false}))
	scores := tensor.New(tensor.WithBacking([]float32{0.95, 0.85, 0.35, 0.15}))
	if err := m.Update([]*tensor.Dense{labels, scores}); err != nil {
		log.Fatal(err)
	}
	// Result is the value at the first threshold (TF divides by
	// 1e-7 + tp + fp, hence not exactly 1/2).
	fmt.Printf("%s: %.4f\n", m.Kind(), m.Result())
	// Results reports one entry per threshold besides the metric's own.
	res := metrics.Results(map[string]metrics.Metric{"precision": m})
	names := make([]string, 0, len(res))
	for name := range res {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Printf("%s=%.4f\n", name, res[name])
	}
	// Output:
	// precision_at_thresholds(0.5,0.2,0.9): 0.5000
	// precision=0.5000
	// precision/threshold_0.2=0.6667
	// precision/threshold_0.5=0.5000
	// precision/threshold_0.9=1.0000
}

func ExampleNewMeanIoU() {
	m, err := metrics.NewMeanIoU(4)
	if err != nil {
		log.Fatal(err)
	}
	// Class 3 appears in neither labels nor predictions, so the mean is over
	// classes 0..2: IoU 1/3, 2/3 and 1/2.
	labels := tensor.New(tensor.WithBacking([]int32{0, 0, 1, 1, 2, 2}))
	preds := tensor.New(tensor.WithBacking([]int32{0, 1, 1, 1, 2, 0}))
	if err := m.Update([]*tensor.Dense{labels, preds}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.4f\n", m.Result())

	// An id outside [0, numClasses) is an error, and the state is unchanged.
	bad := tensor.New(tensor.WithBacking([]int32{0, 4}))
	fmt.Println(m.Update([]*tensor.Dense{bad, bad}))
	// Output:
	// 0.5000
	// metrics: mean_iou(num_classes=4): labels element 1 of shape (2) is 4, outside the class ids [0, 4)
}

func ExampleNewRecallAtK() {
	top1, _ := metrics.NewRecallAtK(1)
	top2, _ := metrics.NewRecallAtK(2)
	// Scores of 3 examples over 3 classes; in the last the label's score
	// ties with class 0's, and the lower index ranks first, as TF's top_k.
	scores := tensor.New(tensor.WithShape(3, 3), tensor.WithBacking([]float64{
		0.1, 0.7, 0.2, // label 1: rank 0
		0.5, 0.3, 0.2, // label 1: rank 1
		0.4, 0.4, 0.2, // label 1: rank 1 (tie)
	}))
	labels := tensor.New(tensor.WithBacking([]int64{1, 1, 1}))
	for _, m := range []metrics.Metric{top1, top2} {
		if err := m.Update([]*tensor.Dense{labels, scores}); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %.4f\n", m.Kind(), m.Result())
	}
	// Output:
	// recall_at_k(k=1): 0.3333
	// recall_at_k(k=2): 1.0000
}

func ExampleBound_Err() {
	g := G.NewGraph()
	labels := G.NewVector(g, G.Int, G.WithShape(4), G.WithName("labels"))
	preds := G.NewVector(g, G.Int, G.WithShape(4), G.WithName("preds"))
	// A bad configuration does not panic: it sets Err, which the caller
	// (the estimator) reports before evaluating.
	b := metrics.MeanIoU(labels, preds, 0)
	fmt.Println(b.Err)
	fmt.Println(b.Kind(), b.Update(b.New()) == b.Err)
	// Output:
	// metrics.MeanIoU: numClasses must be at least 1, got 0
	// invalid(MeanIoU) true
}

func ExampleOption() {
	g := G.NewGraph()
	labels := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("labels"))
	probs := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("probs"))
	w := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("w"))
	// Weights applies to every bound metric; NumThresholds and Curve to AUC.
	auc := metrics.AUC(labels, probs, metrics.Weights(w), metrics.NumThresholds(11), metrics.Curve(metrics.PR))
	fmt.Println(auc.Kind(), len(auc.Inputs), auc.Err)
	// An option that does not apply is an error, not ignored.
	mean := metrics.Mean(probs, metrics.NumThresholds(10))
	fmt.Println(mean.Err)
	_, err := metrics.NewAUC(metrics.Weights(w)) // weights go to Update
	fmt.Println(err)
	// Output:
	// auc(curve=PR,thresholds=11) 3 <nil>
	// metrics.Mean: option NumThresholds does not apply to Mean
	// metrics.NewAUC: option Weights does not apply to NewAUC
}
