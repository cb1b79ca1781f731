package estimator_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

func TestProgressBar(t *testing.T) {
	est, err := estimator.New(replicate.ModelFn(scaleModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}), estimator.RunConfig{LogEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	bar := &estimator.ProgressBar{Out: &buf, Every: 2}
	if err := est.Train(context.Background(), scaleInput(t, 1), estimator.Steps(4), estimator.Hooks(bar)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"train step 4 loss", "4/4", "steps"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress output lacks %q:\n%q", want, out)
		}
	}
}
