//go:build !race

// The race detector slows the layers' loops tenfold: this test runs in the
// build without it (CI's OpenBLAS pass, go test ./...).

package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTrainAndEvaluate: a run prints an evaluation every -eval_every steps
// and at the end; a second run on the same model directory continues from
// the saved step and prints only its own evaluations.
func TestTrainAndEvaluate(t *testing.T) {
	dir := t.TempDir()
	for i, want := range [][]string{{"10", "20"}, {"30", "40"}} {
		var out bytes.Buffer
		last, err := train(context.Background(), small(dir), &out)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, steps(t, out.String())); diff != "" {
			t.Errorf("run %d: evaluation steps (-want +got):\n%s\n%s", i+1, diff, out.String())
		}
		if last["global_step"] != float64(20*(i+1)) {
			t.Errorf("run %d: last evaluation at step %v", i+1, last["global_step"])
		}
	}
}
