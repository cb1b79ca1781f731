package runner_test

import (
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/runner"
	"github.com/towerflow/towerflow/towers"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		args []string
		want runner.Flags
		err  string
	}{
		{nil, runner.Flags{}, ""},
		{[]string{"-model_dir", "d", "-serve", ":8501", "-towers", "3"}, runner.Flags{ModelDir: "d", Serve: ":8501", Towers: 3}, ""},
		{[]string{"-serve", ":8501"}, runner.Flags{Serve: ":8501"}, "-serve needs -model_dir"},
		{[]string{"-towers", "-2"}, runner.Flags{Towers: -2}, "-towers -2: want 0 to 1024"},
		{[]string{"-towers", "100000"}, runner.Flags{Towers: 100000}, "-towers 100000: want 0 to 1024"},
	}
	for _, tc := range tests {
		var f runner.Flags
		fs := flag.NewFlagSet("example", flag.ContinueOnError)
		f.Register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, f); diff != "" {
			t.Errorf("%q: flags (-want +got):\n%s", tc.args, diff)
		}
		err := f.Check()
		if tc.err == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.args, err)
			}
			continue
		}
		wanterr.Mentions(t, err, tc.err)
	}
}

func TestDevices(t *testing.T) {
	tests := []struct {
		n    int
		want []towers.Device
		err  string
	}{
		{0, towers.LocalDevices(), ""},
		{1, []towers.Device{towers.CPU(0)}, ""},
		{3, []towers.Device{towers.CPU(0), towers.CPU(1), towers.CPU(2)}, ""},
		{-1, nil, "-1 towers, want 0 or more"},
	}
	for _, tc := range tests {
		got, err := runner.Devices(tc.n)
		if tc.err != "" {
			wanterr.Mentions(t, err, tc.err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Devices(%d) (-want +got):\n%s", tc.n, diff)
		}
	}
}
