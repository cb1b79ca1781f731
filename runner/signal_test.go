package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
	"github.com/towerflow/towerflow/towers"
)

// TestSignalSavesCheckpoint: an interrupt or SIGTERM during training
// cancels Train's context; the run ends with an error naming the signal,
// and the model directory's latest checkpoint is that of the last step
// trained.
func TestSignalSavesCheckpoint(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			notified := runner.CaptureNotify(t)
			dir := t.TempDir()
			var last int64
			train := func(ctx context.Context) error {
				n := <-notified
				if !slices.Contains(n.Signals, sig) {
					return fmt.Errorf("signals %v do not stop the run, want %v among them", n.Signals, sig)
				}
				m := replicate.ModelFn(linear, replicate.Config{Devices: []towers.Device{towers.CPU(0)}, Optimizer: optimizers.SGD(0.5)})
				est, err := estimator.New(m, estimator.RunConfig{ModelDir: dir, LogEvery: -1})
				if err != nil {
					return err
				}
				defer est.Close()
				features, labels := lineData(100)
				input, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 10, Epochs: estimator.Forever})
				if err != nil {
					return err
				}
				return est.Train(ctx, input, estimator.OnStep(func(step int64, _ float64) {
					last = step
					if step == 3 {
						n.C <- sig
					}
				}))
			}
			err := runner.Run(runner.Flags{ModelDir: dir}, train, runner.Serving{})
			var stopped runner.SignalError
			if !errors.As(err, &stopped) || stopped.Signal != sig || !errors.Is(err, context.Canceled) {
				t.Fatalf("run: %v, want cancelled by %v", err, sig)
			}
			if last < 3 {
				t.Fatalf("trained to step %d, want at least 3", last)
			}
			latest, err := checkpoint.Latest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(dir, checkpoint.Name(last)); latest != want {
				t.Errorf("latest checkpoint %s, want %s (the last step trained)", latest, want)
			}
		})
	}
}
