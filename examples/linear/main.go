// Command linear trains the linear-regression example with one tower per
// local device and prints the learned variables:
//
//	go run ./examples/linear
//
// It logs progress while training and ends with one line "w=<value>
// b=<value>"; the data follows y = 0.1x + 0.3. With -model_dir the run
// keeps checkpoints there, and a second run with the same directory
// continues from the saved step. With -serve it then exports the model
// and serves it with TensorFlow Serving's REST API until interrupted:
//
//	go run ./examples/linear -model_dir runs/linear -serve localhost:8501
//	curl -d '{"instances": [[0.5], [1.0]]}' localhost:8501/v1/models/linear:predict
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"golang.org/x/term"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/serving"
	"github.com/towerflow/towerflow/towers"
)

func main() {
	steps := flag.Int64("steps", 400, "training steps to run (more, when -model_dir holds a checkpoint)")
	modelDir := flag.String("model_dir", "", "directory for checkpoints and history; empty keeps the run in memory")
	batch := flag.Int("batch", 100, "batch size")
	lr := flag.Float64("lr", 0.5, "SGD learning rate")
	n := flag.Int("examples", 1000, "training examples")
	addr := flag.String("serve", "", "after training, export and serve on this address (needs -model_dir), e.g. localhost:8501")
	flag.Parse()
	if *addr != "" && *modelDir == "" {
		fmt.Fprintln(os.Stderr, "linear: -serve needs -model_dir")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *modelDir, *steps, *batch, *lr, *n); err != nil {
		fmt.Fprintln(os.Stderr, "linear:", err)
		os.Exit(1)
	}
	if *addr != "" {
		if err := serve(ctx, *modelDir, *addr, *lr); err != nil {
			fmt.Fprintln(os.Stderr, "linear:", err)
			os.Exit(1)
		}
	}
}

func newModel(lr float64) *replicate.Model {
	// The zero Config's devices and loss reduction: one tower per local
	// device, each weighted by its share of the batch, so the run trains
	// the same on any machine.
	return replicate.ModelFn(linreg.Model, replicate.Config{Optimizer: optimizers.SGD(lr)})
}

// serve exports the latest checkpoint of modelDir to modelDir/export and
// serves the newest export as model "linear" until ctx is done.
func serve(ctx context.Context, modelDir, addr string, lr float64) error {
	est, err := estimator.New(newModel(lr), estimator.RunConfig{ModelDir: modelDir, LogEvery: -1})
	if err != nil {
		return err
	}
	defer est.Close()
	base := filepath.Join(modelDir, "export")
	dir, err := est.Export(ctx, base, estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}, estimator.KeepVersions(3))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv, err := serving.NewServer([]serving.ModelConfig{{Name: "linear", BaseDir: base, Model: newModel(lr)}}, serving.Config{Logger: log})
	if err != nil {
		return err
	}
	defer srv.Close()
	go srv.Watch(ctx, 10*time.Second) // pick up newer exports
	log.Info("serving", "export", dir, "addr", addr,
		"try", fmt.Sprintf(`curl -d '{"instances": [[0.5], [1.0]]}' %s/v1/models/linear:predict`, addr))
	return serving.ListenAndServe(ctx, addr, srv)
}

func run(ctx context.Context, modelDir string, steps int64, batch int, lr float64, n int) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	devices := towers.LocalDevices()
	cfg := estimator.RunConfig{ModelDir: modelDir, Seed: 1, LogEvery: 50, Logger: log}
	if term.IsTerminal(int(os.Stderr.Fd())) && os.Getenv("TERM") != "dumb" {
		cfg.Progress = os.Stderr // a bar in place of a log line every 50 steps
	}
	est, err := estimator.New(newModel(lr), cfg)
	if err != nil {
		return err
	}
	defer est.Close()
	features, labels := linreg.Data(n, 1)
	train, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: batch, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		return err
	}
	log.Info("training", "towers", len(devices), "devices", fmt.Sprint(devices), "steps", steps, "batch", batch)
	if steps > 0 {
		if err := est.Train(ctx, train, estimator.Steps(steps)); err != nil {
			return err
		}
	}
	eval, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: batch})
	if err != nil {
		return err
	}
	// The Estimator logs the evaluation's results.
	if _, err := est.Evaluate(ctx, eval); err != nil {
		return err
	}
	w, err := est.VariableValue("w")
	if err != nil {
		return err
	}
	b, err := est.VariableValue("b")
	if err != nil {
		return err
	}
	fmt.Printf("w=%.4f b=%.4f\n", w.Data(), b.Data())
	return nil
}
