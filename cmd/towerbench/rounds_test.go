package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/testpython"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestRoundsScript: bench/rounds.py runs its commands in interleaved
// rounds (ROUND set to each), reads towerbench's figures (towers=N
// samples_per_sec=X) from them, and prints each figure's median and range
// and each ratio's per-round values, a ratio's denominator the best of
// its figures in that round; a command that fails or prints no figure, a
// ratio of a figure nobody printed and a malformed --run are errors that
// name them.
func TestRoundsScript(t *testing.T) {
	python := testpython.Find(t, "python3", "statistics")
	a := `a=echo "model=m impl=a towers=1 samples_per_sec=$((100*ROUND))"; echo "model=m impl=a towers=2 samples_per_sec=$((150*ROUND+10))"`
	b := `b=echo "model=m impl=b towers=1 samples_per_sec=$((50+ROUND))"`
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string // stdout lines, when it succeeds
		wantErr []string // what stderr names, when it fails
	}{
		{"medians and ratios", []string{"-n", "3", "--run", a, "--run", b, "--ratio", "a/2:b/1", "--ratio", "a/2:a/1,b/1"}, []string{
			"samples/s over 3 interleaved rounds",
			"a/1  median 200.0 (100.0–300.0)  n=3",
			"a/2  median 310.0 (160.0–460.0)  n=3",
			"b/1  median 52.0 (51.0–53.0)  n=3",
			"a/2 over b/1: median 5.962 (3.137–8.679); per round 3.137 5.962 8.679",
			"a/2 over best of a/1, b/1: median 1.550 (1.533–1.600); per round 1.600 1.550 1.533",
		}, nil},
		{"failing command", []string{"-n", "2", "--run", b, "--run", "c=echo oops >&2; exit 3"}, nil, []string{"round 1", "c exited with 3", "oops"}},
		{"no figure", []string{"--run", "c=echo hello"}, nil, []string{"round 1", "c printed no", "samples_per_sec"}},
		{"unknown figure", []string{"-n", "1", "--run", b, "--ratio", "b/2:b/1"}, nil, []string{"--ratio b/2:b/1", "no figure b/2", "have b/1"}},
		{"malformed run", []string{"--run", "nope"}, nil, []string{"--run 'nope'", "want NAME=COMMAND"}},
		{"no rounds", []string{"-n", "0", "--run", b}, nil, []string{"-n 0", "at least 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(python, append([]string{"../../bench/rounds.py"}, tc.args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; output:\n%s", out)
				}
				wanterr.Mentions(t, errorOf(stderr.String()), tc.wantErr...)
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			if diff := cmp.Diff(tc.want, strings.Split(strings.TrimSpace(string(out)), "\n")); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// errorOf is stderr as an error, for wanterr.
type errorOf string

func (e errorOf) Error() string { return string(e) }
