package dataset_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// linear learns y = w*x + b with a mean squared error loss.
func linear(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	w := t.MustVariable("w", tensor.Float64, tensor.Shape{1, 1}, towers.RandomUniform(-1, 1))
	b := t.MustVariable("b", tensor.Float64, nil, towers.Zeros())
	pred := G.Must(G.Add(G.Must(G.Mul(features["x"], w)), b))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": pred}}
	if mode == model.Predict {
		return spec, nil
	}
	spec.Loss = G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, labels["y"]))))))
	spec.TrainOps = []model.TrainOp{{Optimizer: optimizers.SGD(0.5)}}
	return spec, nil
}

// Training on a CSV file: 200 points on y = 0.1x + 0.3 read in shuffled
// batches of 20, parsed on two workers, for as many epochs as the steps
// need.
func ExamplePipeline_csv() {
	dir, err := os.MkdirTemp("", "pipeline")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var rows strings.Builder
	rows.WriteString("x,y\n")
	for i := range 200 {
		x := float64(i) / 200
		fmt.Fprintf(&rows, "%g,%g\n", x, 0.1*x+0.3)
	}
	if err := os.WriteFile(filepath.Join(dir, "points.csv"), []byte(rows.String()), 0o644); err != nil {
		log.Fatal(err)
	}

	input, err := dataset.Pipeline{
		Files: []string{filepath.Join(dir, "*.csv")},
		CSV: &dataset.CSVOptions{Schema: dataset.Schema{
			{Name: "x", Kind: dataset.KindFloat},
			{Name: "y", Kind: dataset.KindFloat},
		}},
		Spec: map[string]dataset.FeatureSpec{
			"x": {Dtype: tensor.Float64, Shape: []int{1}},
			"y": {Dtype: tensor.Float64, Shape: []int{1}, Label: true},
		},
		BatchSize: 20, Epochs: estimator.Forever, ShuffleBuffer: 100, Seed: 1, Workers: 2,
	}.Input()
	if err != nil {
		log.Fatal(err)
	}
	est, err := estimator.New(replicate.ModelFn(linear, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
		estimator.RunConfig{Seed: 1, LogEvery: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer est.Close()
	if err := est.Train(context.Background(), input, estimator.MaxSteps(400)); err != nil {
		log.Fatal(err)
	}
	w, _ := est.VariableValue("w")
	b, _ := est.VariableValue("b")
	fmt.Printf("w=%.2f b=%.2f\n", w.Data().([]float64)[0], b.Data())
	// Output:
	// w=0.10 b=0.30
}
