package estimator_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

func TestNewErrors(t *testing.T) {
	one := replicate.ModelFn(scaleModel, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	tests := []struct {
		name string
		m    *replicate.Model
		cfg  estimator.RunConfig
		want string // "" for no error
	}{
		{name: "nil model", want: "nil model"},
		{name: "progress bar with logging off", m: one, cfg: estimator.RunConfig{LogEvery: -1, Progress: &bytes.Buffer{}}, want: "RunConfig.Progress is set but LogEvery is negative"},
		{name: "progress bar at the default interval", m: one, cfg: estimator.RunConfig{Progress: &bytes.Buffer{}}},
		{name: "logging off", m: one, cfg: estimator.RunConfig{LogEvery: -1}},
		{name: "warm start from nowhere", m: one, cfg: estimator.RunConfig{WarmStart: &estimator.WarmStart{}}, want: "RunConfig.WarmStart.From is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := estimator.New(tc.m, tc.cfg)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.want == "" && err != nil || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("New: error %q, want one containing %q", got, tc.want)
			}
		})
	}
}
