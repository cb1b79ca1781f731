package estimator_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// dirContents returns every path under dir with its content ("dir" for a
// directory). Train's lock file is bookkeeping, not data: it records the
// holder of every Train that took it, so only its presence is compared.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		if rel == estimator.TrainLockFile {
			out[rel] = "lock"
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEveryCheckpointDamaged: when every checkpoint of the model directory
// is damaged, Train, Evaluate, Predict and Export fail with a data-loss
// error naming each checkpoint and what is wrong with it — rather than
// training from step 0, whose saves would delete the damaged originals —
// and leave the directory exactly as it was.
func TestEveryCheckpointDamaged(t *testing.T) {
	dir := t.TempDir()
	cfg := estimator.RunConfig{ModelDir: dir, SaveCheckpointsSteps: 1, KeepCheckpointMax: 3, LogEvery: -1}
	first := newRunEstimator(t, replicated(knobModel, 2), cfg)
	if err := first.Train(context.Background(), foreverInput(t, 4), estimator.Steps(5)); err != nil {
		t.Fatal(err)
	}
	kept := checkpointDirs(t, dir)
	if diff := cmp.Diff([]string{"ckpt-3", "ckpt-4", "ckpt-5"}, kept); diff != "" {
		t.Fatalf("kept checkpoints (-want +got):\n%s", diff)
	}
	// One byte flipped in the file of w of each.
	var want []string
	for _, c := range kept {
		files, err := filepath.Glob(filepath.Join(dir, c, "*-w.npy"))
		if err != nil || len(files) != 1 {
			t.Fatalf("the file of w in %s: %q, %v", c, files, err)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 1
		if err := os.WriteFile(files[0], b, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, files[0]+": file is corrupted")
	}
	before := dirContents(t, dir)

	// Training too, and every call that needs a trained model.
	ops := append([]estimatorOp{{"Train", func(est *estimator.Estimator) error {
		return est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2))
	}}}, untrainedOps(t)...)
	for _, op := range ops {
		for _, who := range []struct {
			name string
			est  func() *estimator.Estimator
		}{
			{"new Estimator", func() *estimator.Estimator { return newRunEstimator(t, replicated(knobModel, 2), cfg) }},
			// The one that saved them holds the state in memory, but the
			// directory is still damaged.
			{"the Estimator that saved them", func() *estimator.Estimator { return first }},
		} {
			t.Run(op.name+", "+who.name, func(t *testing.T) {
				err := op.run(who.est())
				if !errors.Is(err, checkpoint.ErrDamaged) {
					t.Fatalf("%s = %v, want an error wrapping checkpoint.ErrDamaged", op.name, err)
				}
				if errors.Is(err, checkpoint.ErrNoCheckpoint) {
					t.Errorf("%s = %v: damage must not read as a fresh directory", op.name, err)
				}
				wanterr.Mentions(t, err, want...)
				if diff := cmp.Diff(before, dirContents(t, dir)); diff != "" {
					t.Errorf("%s changed the model directory (-before +after):\n%s", op.name, diff)
				}
			})
		}
	}
}

// TestCheckpointSaverOnDamagedDirectory: the CheckpointSaver hook, used on
// its own, refuses to begin in a directory whose checkpoints are all
// damaged: its saves would delete them.
func TestCheckpointSaverOnDamagedDirectory(t *testing.T) {
	dir := t.TempDir()
	est := newRunEstimator(t, replicated(knobModel, 2), estimator.RunConfig{LogEvery: -1})
	saver := &estimator.CheckpointSaver{Dir: dir, EverySteps: 1, Keep: 1}
	if err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2), estimator.Hooks(saver)); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(dir, checkpoint.Name(2))
	if err := os.Remove(filepath.Join(ckpt, checkpoint.ManifestFile)); err != nil {
		t.Fatal(err)
	}
	before := dirContents(t, dir)
	err := est.Train(context.Background(), foreverInput(t, 4), estimator.Steps(2), estimator.Hooks(&estimator.CheckpointSaver{Dir: dir, EverySteps: 1, Keep: 1}))
	if !errors.Is(err, checkpoint.ErrDamaged) {
		t.Fatalf("Train = %v, want an error wrapping checkpoint.ErrDamaged", err)
	}
	wanterr.Mentions(t, err, filepath.Join(ckpt, checkpoint.ManifestFile), "missing")
	if diff := cmp.Diff(before, dirContents(t, dir)); diff != "" {
		t.Errorf("Train changed the directory (-before +after):\n%s", diff)
	}
}
