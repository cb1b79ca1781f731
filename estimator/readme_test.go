package estimator_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// README:begin
func linear(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	w := s.MustVariable("w", tensor.Float64, nil, towers.RandomUniform(-1, 1))
	b := s.MustVariable("b", tensor.Float64, nil, towers.Zeros())
	pred := G.Must(G.Add(G.Must(G.Mul(features.Get("x"), w)), b))
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": pred}}
	if mode != model.Predict {
		diff := G.Must(G.Sub(pred, labels.Get("y")))
		spec.Loss = G.Must(G.Mean(G.Must(G.Square(diff))))
		spec.EvalMetrics = map[string]metrics.Bound{"mae": metrics.Mean(G.Must(G.Abs(diff)))}
	}
	return spec, nil
}

func Example_readme() {
	features, labels := linreg.Data(1000, 1) // y = 0.1x + 0.3
	ctx := context.Background()

	// One tower per core, each weighted by its share of the batch: N towers
	// train exactly like one device.
	m := replicate.ModelFn(linear, replicate.Config{Optimizer: optimizers.SGD(0.5)})
	est, err := estimator.New(m, estimator.RunConfig{Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer est.Close()
	input, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100, Epochs: estimator.Forever, Shuffle: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := est.Train(ctx, input, estimator.MaxSteps(400)); err != nil {
		log.Fatal(err)
	}
	eval, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100})
	if err != nil {
		log.Fatal(err)
	}
	scores, err := est.Evaluate(ctx, eval) // "loss", "global_step", "mae"
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("step %v: mae %.4f\n", scores["global_step"], scores["mae"])
	for p, err := range est.Predict(ctx, eval) { // one Prediction per example, input order
		if err != nil {
			log.Fatal(err)
		}
		x := features["x"].Data().([]float64)[0]
		fmt.Printf("y(%.2f) = %.4f\n", x, p["y"].Data())
		break
	}
	// Output:
	// step 400: mae 0.0000
	// y(0.34) = [0.3340]
}

// README:end

// TestREADMEShowsTheExample: README.md's model function and run are the
// code of Example_readme, line for line, so the README cannot drift from
// code that compiles and runs.
func TestREADMEShowsTheExample(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code := string(src)
	code = code[strings.Index(code, "// README:begin\n")+len("// README:begin\n") : strings.Index(code, "// README:end")]
	code = strings.TrimSpace(code)
	if !strings.Contains(string(readme), "```go\n"+code+"\n```") {
		t.Errorf("README.md does not show Example_readme's code as a go block; paste this between ```go and ```:\n%s", code)
	}
}
