package estimator

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TrainLockFile is the lock file Train holds in the model directory while
// it trains, so that one model directory has one writer. It records the
// holder ("pid <pid> on <host> since <time>"); the file stays when the run
// ends. On unix it is an flock(2) lock, which belongs to the open file and
// which the kernel releases when the process holding it exits or dies: a
// crashed run leaves no stale lock, and the next Train takes it at once.
// Other systems take no lock.
const TrainLockFile = "train.lock"

// ErrModelDirLocked is wrapped by the error of Train (and TrainAndEvaluate)
// when another Train — in another process, or another Estimator of this
// one — is training into the same model directory. The error names the
// directory and the holder the lock file records. Evaluate, Predict and
// Export take no lock: they read the latest whole checkpoint while
// another run trains.
var ErrModelDirLocked = errors.New("model directory is locked by another training run")

// trainLock is a held TrainLockFile.
type trainLock struct{ f *os.File }

// lockModelDir takes dir's training lock without waiting, creating dir and
// the lock file as needed, and records this process as its holder.
func lockModelDir(dir string) (*trainLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock model directory: %w", err)
	}
	path := filepath.Join(dir, TrainLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock model directory: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock model directory: %s: %w", path, err)
	}
	if !held {
		holder := "a holder the lock file does not record"
		if b, err := io.ReadAll(io.LimitReader(f, 256)); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			holder = strings.TrimSpace(string(b))
		}
		f.Close()
		return nil, fmt.Errorf("%w: %s: held by %s (lock file %s); one model directory takes one training run at a time", ErrModelDirLocked, dir, holder, path)
	}
	host, err := os.Hostname()
	if err != nil {
		host = "an unknown host"
	}
	record := fmt.Sprintf("pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if err = f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(record), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock model directory: %s: %w", path, err)
	}
	return &trainLock{f}, nil
}

// release gives the lock up, also where a child process holds a copy of
// the lock file's descriptor, then closes the file.
func (l *trainLock) release() {
	unlock(l.f)
	l.f.Close()
}
