package estimator_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// trainLockDirEnv names the model directory TestTrainLockHelper trains
// into.
const trainLockDirEnv = "TOWERFLOW_TRAIN_LOCK_DIR"

// TestTrainLockHelper is the child process of TestTrainLockProcesses: it
// trains two steps into the model directory its environment names,
// printing "holding" on standard output after the first and waiting there
// until its standard input closes. It does nothing in a normal test run.
func TestTrainLockHelper(t *testing.T) {
	dir := os.Getenv(trainLockDirEnv)
	if dir == "" {
		t.Skip("helper process for TestTrainLockProcesses")
	}
	est := newRunEstimator(t, replicated(knobModel, 1), estimator.RunConfig{ModelDir: dir, LogEvery: -1})
	hold := estimator.OnStep(func(step int64, _ float64) {
		if step == 1 {
			fmt.Println("holding")
			io.Copy(io.Discard, os.Stdin)
		}
	})
	if err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2), hold); err != nil {
		t.Fatal(err)
	}
}

// readOnlyOps are the calls another process makes on a model directory
// that is being trained: none waits for or fails on the training lock.
func readOnlyOps(t *testing.T) []estimatorOp {
	return untrainedOps(t) // Evaluate, Predict, PredictBatches, Export
}

// checkLocked checks that Train on est, whose model directory dir another
// run is training into, fails at once with ErrModelDirLocked naming dir
// and holder, and touches nothing in dir; and that every readOnlyOps call
// works meanwhile.
func checkLocked(t *testing.T, est *estimator.Estimator, dir, holder string) {
	t.Helper()
	before := dirContents(t, dir)
	err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1))
	if !errors.Is(err, estimator.ErrModelDirLocked) {
		t.Fatalf("Train into a directory being trained = %v, want an error wrapping ErrModelDirLocked", err)
	}
	wanterr.Mentions(t, err, dir, holder)
	if diff := cmp.Diff(before, dirContents(t, dir)); diff != "" {
		t.Errorf("the refused Train changed the model directory (-before +after):\n%s", diff)
	}
	for _, op := range readOnlyOps(t) {
		if err := op.run(est); err != nil {
			t.Errorf("%s while another run trains: %v", op.name, err)
		}
	}
}

// TestTrainLockProcesses: while a process trains into a model directory,
// Train from another process fails at once naming the holder's pid, and
// the holder's checkpoints stay as they are; Evaluate, Predict and Export
// work. Once the holder ends, or is killed (the kernel releases its
// lock), Train works.
func TestTrainLockProcesses(t *testing.T) {
	tests := []struct {
		name    string
		end     func(cmd *exec.Cmd, stdin io.Closer) error
		wantErr bool // from the child's Wait
	}{
		{"holder finishes", func(_ *exec.Cmd, stdin io.Closer) error { return stdin.Close() }, false},
		{"holder killed", func(cmd *exec.Cmd, _ io.Closer) error { return cmd.Process.Kill() }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestTrainLockHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), trainLockDirEnv+"="+dir)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer // read after Wait
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { // after a failure: the child holds on
				stdin.Close()
				cmd.Process.Kill()
			})
			lines := bufio.NewScanner(stdout)
			var out []string
			for lines.Scan() && lines.Text() != "holding" {
				out = append(out, lines.Text())
			}
			if lines.Err() != nil || lines.Text() != "holding" {
				stdin.Close()
				cmd.Wait()
				t.Fatalf("the child did not start training: %v\n%v\n%s", lines.Err(), out, stderr.String())
			}
			go io.Copy(io.Discard, stdout)

			est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: -1})
			checkLocked(t, est, dir, fmt.Sprintf("pid %d on ", cmd.Process.Pid))

			if err := tc.end(cmd, stdin); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); (err != nil) != tc.wantErr {
				t.Fatalf("child: %v, want error %v\n%s", err, tc.wantErr, stderr.String())
			}
			if err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1)); err != nil {
				t.Fatalf("Train after the holder ended: %v", err)
			}
			wantStep := int64(3) // the child's 2 steps, then 1
			if tc.wantErr {
				wantStep = 1 // the killed child's checkpoint is its first, of step 0
			}
			if got := est.GlobalStep(); got != wantStep {
				t.Errorf("global step after training on: %d, want %d", got, wantStep)
			}
		})
	}
}

// TestTrainLockInProcess: two Estimators of one process on one model
// directory are two runs: while one trains, the other's Train fails at
// once, and its Evaluate, Predict and Export work.
func TestTrainLockInProcess(t *testing.T) {
	dir := t.TempDir()
	first := newRunEstimator(t, replicated(knobModel, 1), estimator.RunConfig{ModelDir: dir, LogEvery: -1})
	holding, release := make(chan struct{}), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // after a failure, before first.Close waits for its Train
	hold := estimator.OnStep(func(step int64, _ float64) {
		if step == 1 {
			close(holding)
			<-release
		}
	})
	done := make(chan error, 1)
	go func() { done <- first.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2), hold) }()
	select {
	case <-holding:
	case err := <-done:
		t.Fatalf("the first Train ended before its first step's hook: %v", err)
	}
	second := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{ModelDir: dir, LogEvery: -1})
	checkLocked(t, second, dir, fmt.Sprintf("pid %d on ", os.Getpid()))
	releaseOnce()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := second.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1)); err != nil {
		t.Fatalf("Train after the first ended: %v", err)
	}
	if got := second.GlobalStep(); got != 3 {
		t.Errorf("global step: %d, want 3", got)
	}
	// The same Estimator trains again: its lock was released.
	if err := first.Train(context.Background(), foreverInput(t, 4), estimator.Steps(1)); err != nil {
		t.Fatalf("Train again: %v", err)
	}
}
