package cifar_test

import (
	"strings"
	"testing"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/cifar10/cifar"
	"github.com/towerflow/towerflow/internal/bf16"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TestBFloat16KeepsBatchNormFloat32: a ResNet-8 step in bfloat16 mixed
// precision on two towers leaves every variable float32 and holding
// values no bfloat16 holds, the batch norms' moving means and variances
// (state updates, combined over the towers) and γ, β included: batch
// normalization and its statistics stay float32.
func TestBFloat16KeepsBatchNormFloat32(t *testing.T) {
	feats, labels := colourData(8, 32, 1)
	est, err := estimator.New(replicate.ModelFn(cifar.ResNet{Depth: 8}.Model,
		replicate.Config{Devices: towers.CPUs(2), Optimizer: cifar.Optimizer(0.05), Precision: towers.BFloat16}),
		estimator.RunConfig{Seed: 11, LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	train(t, est, feats, labels, 8, 1)
	moving := 0
	for _, name := range est.VariableNames() {
		if name == model.GlobalStepName {
			continue
		}
		if strings.Contains(name, "moving") {
			moving++
		}
		v, err := est.VariableValue(name)
		if err != nil {
			t.Fatal(err)
		}
		data, ok := v.Data().([]float32)
		if !ok {
			t.Errorf("%s has dtype %v, want float32", name, v.Dtype())
			continue
		}
		finer := false
		for _, f := range data {
			if bf16.Round(f) != f {
				finer = true
				break
			}
		}
		if !finer {
			t.Errorf("%s: every value is a bfloat16 after a step: stored or updated in bfloat16", name)
		}
	}
	if moving == 0 {
		t.Errorf("variables %q: no batch norm moving statistics", est.VariableNames())
	}
}
