package main

import (
	"regexp"
	"strings"
	"testing"
)

// small is a quick run: ResNet-8 on a small synthetic set, two towers.
func small(modelDir string) options {
	o := defaults
	o.depth, o.steps, o.evalEvery, o.batch = 8, 20, 10, 32
	o.boundaries = []int64{15}
	o.synthetic = [2]int{200, 100}
	o.Towers, o.ModelDir, o.logEvery = 2, modelDir, -1
	return o
}

var evalLine = regexp.MustCompile(`^step=(\d+) accuracy=[01]\.\d{4} top5=[01]\.\d{4} loss=\d+\.\d{4}$`)

// steps returns the steps of out's evaluation lines, and checks that the
// synthetic data set was announced.
func steps(t *testing.T, out string) []string {
	t.Helper()
	if !strings.Contains(out, "no -data: training on a synthetic data set") {
		t.Errorf("the synthetic data set is not announced:\n%s", out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if m := evalLine.FindStringSubmatch(line); m != nil {
			got = append(got, m[1])
		}
	}
	return got
}

// TestOptionErrors: flags the command cannot run with are errors naming
// them.
func TestOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(*options)
		want string
	}{
		{"depth", func(o *options) { o.depth = 21 }, "depth 21 is not 6n + 2"},
		{"batch", func(o *options) { o.batch = 0 }, "-batch 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := small("")
			tc.edit(&o)
			if err := o.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := parseInts("100,x"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("-boundaries 100,x: err = %v", err)
	}
}
