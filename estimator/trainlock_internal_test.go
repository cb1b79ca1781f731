//go:build unix

package estimator

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// TestTrainLockReleasedDespiteACopy: a child process holding a copy of the
// lock file's descriptor — as one forked while a run trains holds it until
// its exec — does not keep the lock once the run releases it, so the next
// Train into the directory takes it.
func TestTrainLockReleasedDespiteACopy(t *testing.T) {
	dir := t.TempDir()
	lock, err := lockModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("cat")
	child.ExtraFiles = []*os.File{lock.f}
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		child.Wait()
	}()

	lock.release()
	again, err := lockModelDir(dir)
	if err != nil {
		t.Fatalf("lock after release, a child holding a copy of the descriptor: %v (errors.Is ErrModelDirLocked: %v)", err, errors.Is(err, ErrModelDirLocked))
	}
	again.release()
}
