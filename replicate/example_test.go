package replicate_test

import (
	"context"
	"fmt"
	"log"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// Example trains the linear-regression model on two CPU towers. Each batch
// of 100 rows is split 50/50; with the default loss reduction, BatchMean,
// the towers train exactly like one device.
func Example() {
	m := replicate.ModelFn(linreg.Model,
		replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Optimizer: optimizers.SGD(0.5)})
	est, err := estimator.New(m, estimator.RunConfig{Seed: 1, LogEvery: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer est.Close()
	ctx := context.Background()

	features, labels := linreg.Data(1000, 1)
	train, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	if err := est.Train(ctx, train, estimator.MaxSteps(400)); err != nil {
		log.Fatal(err)
	}
	eval, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 100})
	if err != nil {
		log.Fatal(err)
	}
	scores, err := est.Evaluate(ctx, eval)
	if err != nil {
		log.Fatal(err)
	}
	w, _ := est.VariableValue("w")
	b, _ := est.VariableValue("b")
	fmt.Printf("step %.0f: w=%.2f b=%.2f mean_abs_error=%.2f\n", scores["global_step"], w.Data(), b.Data(), scores["mean_abs_error"])
	for _, name := range est.VariableNames() {
		d, _ := est.Store().Device(name)
		fmt.Println(name, "on", d)
	}
	// Output:
	// step 400: w=0.10 b=0.30 mean_abs_error=0.00
	// global_step on /device:CPU:0
	// w on /device:CPU:0
	// b on /device:CPU:0
}

// Example_roundRobin places the model's variables over the towers' devices
// in creation order instead of all on CPU:0; the global step stays on the
// parameter server.
func Example_roundRobin() {
	devices := []towers.Device{towers.CPU(0), towers.CPU(1)}
	m := replicate.ModelFn(linreg.Model,
		replicate.Config{Devices: devices, Optimizer: optimizers.SGD(0.5), Placement: towers.RoundRobin(devices...)})
	est, err := estimator.New(m, estimator.RunConfig{LogEvery: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer est.Close()
	features, labels := linreg.Data(4, 1)
	train, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 4})
	if err != nil {
		log.Fatal(err)
	}
	if err := est.Train(context.Background(), train); err != nil {
		log.Fatal(err)
	}
	for _, name := range est.VariableNames() {
		d, _ := est.Store().Device(name)
		fmt.Println(name, "on", d)
	}
	// Output:
	// global_step on /device:CPU:0
	// w on /device:CPU:0
	// b on /device:CPU:1
}
