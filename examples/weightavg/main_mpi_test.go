//go:build mpi

package main

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/mpitest"
)

// mpiOutput is what a rank of TestMPIPrintsTheSame printed.
type mpiOutput struct {
	Out, Err string
}

// mpiChild is a rank of an MPI test: it runs run on this process's
// worker and writes what it printed, or its error.
func mpiChild(t *testing.T, run func(comms []collective.Comm, out io.Writer) error) {
	comms, err := group(0)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var res mpiOutput
	if err := run(comms, &out); err != nil {
		res.Err = err.Error()
	}
	res.Out = out.String()
	closeAll(comms)
	if err := mpitest.WriteResult(comms[0].Rank(), res); err != nil {
		t.Fatal(err)
	}
}

// timings are the parts of the output that depend on the run's speed or
// place: times, rates and the temporary directory.
var timings = regexp.MustCompile(`seconds=\S+|steps_per_sec=\S+|ms_per_step=\S+| in /tmp/\S+,`)

// TestMPIPrintsTheSame: `mpirun -np 2 weightavg`, in either mode, prints on
// rank 0 alone what `weightavg -workers 2` prints (times aside).
func TestMPIPrintsTheSame(t *testing.T) {
	gradients, err := parse([]string{"-mode", "gradients", "-steps", "61"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	weights := small(t)
	tests := []struct {
		name string
		run  func(ctx context.Context, comms []collective.Comm, out io.Writer) error
		// same makes both outputs comparable (times, and how the workers
		// run, aside); last is a line rank 0's output must hold.
		same func(string) string
		last string
	}{
		{"weights", func(ctx context.Context, comms []collective.Comm, out io.Writer) error {
			_, err := train(ctx, weights, comms, out)
			return err
		}, func(s string) string {
			return strings.Replace(timings.ReplaceAllString(s, ""), "(goroutines of one process)", "(processes)", 1)
		}, "workers=2 "},
		{"gradients", func(ctx context.Context, comms []collective.Comm, out io.Writer) error {
			_, err := trainGradients(ctx, gradients, comms, out)
			return err
		}, func(s string) string { return s }, "iteration=60 "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if mpitest.Child() {
				mpiChild(t, func(comms []collective.Comm, out io.Writer) error { return tc.run(t.Context(), comms, out) })
				return
			}
			var one strings.Builder
			if err := tc.run(t.Context(), collective.Local(2), &one); err != nil {
				t.Fatal(err)
			}
			res := mpitest.ReadResults[mpiOutput](t, mpitest.Run(t, 2), 2)
			if res[0].Err != "" || res[1].Err != "" {
				t.Fatalf("errors: %q, %q", res[0].Err, res[1].Err)
			}
			if res[1].Out != "" {
				t.Errorf("rank 1 printed %q, want nothing", res[1].Out)
			}
			if diff := cmp.Diff(tc.same(one.String()), tc.same(res[0].Out)); diff != "" {
				t.Errorf("rank 0's output (-one process +mpirun):\n%s", diff)
			}
			if !strings.Contains(res[0].Out, tc.last) {
				t.Errorf("rank 0 printed %q, want a line with %q", res[0].Out, tc.last)
			}
		})
	}
}
