package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/runner"
)

// captureStdout runs fn with os.Stdout sent to a pipe and returns what fn
// printed.
func captureStdout(t *testing.T, fn func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	err = fn()
	os.Stdout = stdout
	w.Close()
	return <-read, err
}

// wantLine is what run prints for the checkpoint of step in dir.
func wantLine(t *testing.T, dir string, step int64) string {
	t.Helper()
	r, err := checkpoint.Read(filepath.Join(dir, checkpoint.Name(step)))
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.Tensor("w")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Tensor("b")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("w=%.4f b=%.4f\n", w.Data(), b.Data())
}

// historySteps returns the "step" of every line of a history file.
func historySteps(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			Step int64 `json:"step"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		steps = append(steps, rec.Step)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}

// TestModelDirContinues: two runs of 100 steps on one model directory, as
// `go run ./examples/linear -model_dir=DIR -steps=100` twice: the second
// continues from the first's checkpoint to step 200, and each prints the
// learned w and b on stdout, those of its final checkpoint.
func TestModelDirContinues(t *testing.T) {
	dir := t.TempDir()
	var printed []string
	for i := range 2 {
		out, err := captureStdout(t, func() error {
			return train(context.Background(), options{Flags: runner.Flags{ModelDir: dir}, steps: 100, batch: 100, lr: 0.5, examples: 1000})
		})
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		printed = append(printed, out)
	}
	r, err := checkpoint.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Step() != 200 {
		t.Errorf("latest checkpoint at step %d, want 200", r.Step())
	}
	want := []string{wantLine(t, dir, 100), wantLine(t, dir, 200)}
	if diff := cmp.Diff(want, printed); diff != "" {
		t.Errorf("stdout of the two runs (-want +got):\n%s", diff)
	}
	if printed[0] == printed[1] {
		t.Errorf("the second run printed the first's values %q: it did not train on", printed[0])
	}
	// LogEvery 50: the train history has every 50th step of both runs; each
	// run's evaluation is in the eval history.
	if diff := cmp.Diff([]int64{50, 100, 150, 200}, historySteps(t, filepath.Join(dir, estimator.TrainHistoryFile))); diff != "" {
		t.Errorf("train history steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{100, 200}, historySteps(t, filepath.Join(dir, estimator.EvalHistoryFile))); diff != "" {
		t.Errorf("eval history steps (-want +got):\n%s", diff)
	}
}
