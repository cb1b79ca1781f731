package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/towerflow/towerflow/internal/fsutil"
)

// Latest returns the path of the newest whole checkpoint of the model
// directory dir: the one the pointer file names, verified (manifest, and
// every variable file's size and checksum). When it is damaged Latest falls
// back to the previously kept checkpoints, newest saved first; when the
// pointer file itself is missing or damaged it scans dir for ckpt-<step>
// directories, highest step first (Read says what it passed over:
// Reader.Skipped). Temporary directories of an interrupted Save are never
// candidates; a checkpoint that an interrupted Save of the same step moved
// aside stands in for its missing original.
//
// Only damage is passed over: content that does not verify, a missing file
// or checkpoint. A file that cannot be read — permissions, an I/O error,
// something other than a regular file where a file belongs, a symbolic
// link out of its checkpoint, a checkpoint directory that a symbolic link
// takes out of dir — stops the search with an error naming it, since an
// older checkpoint would silently lose the training since.
//
// It returns an error wrapping ErrNoCheckpoint when dir does not exist or
// has never held a checkpoint (neither a pointer file nor a checkpoint
// directory), and one wrapping ErrDamaged, which names every checkpoint and
// what is wrong with it, when it has checkpoints and none is whole.
func Latest(dir string) (string, error) {
	r, err := latest(dir)
	if err != nil {
		return "", err
	}
	return r.path, nil
}

func latest(dir string) (*Reader, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint: %w in %s: %v", ErrNoCheckpoint, dir, err)
	} else if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	scanned, err := scan(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var skipped, damaged []string
	var cands []string
	p, err := readPointer(dir)
	switch {
	case err == nil:
		cands = slices.Clone(p.Checkpoints)
		slices.Reverse(cands)
	case errors.Is(err, fs.ErrNotExist):
		if len(scanned) > 0 {
			skipped = append(skipped, fmt.Sprintf("no pointer file; scanned %s for checkpoints", dir))
		}
	case unreadable(err):
		return nil, fmt.Errorf("checkpoint: pointer file: %w", err)
	default:
		skipped = append(skipped, fmt.Sprintf("pointer file is damaged (%v); scanned %s for checkpoints", err, dir))
		if len(scanned) == 0 {
			// A pointer is written only once a checkpoint is in place.
			damaged = append(damaged, fmt.Sprintf("%v, and there is no checkpoint directory", err))
		}
	}
	// Last resort, or the only candidates without a pointer: checkpoint
	// directories the pointer does not name, highest step first.
	for i := len(scanned) - 1; i >= 0; i-- {
		if !slices.Contains(cands, scanned[i]) {
			cands = append(cands, scanned[i])
		}
	}
	for _, c := range cands {
		paths := []string{filepath.Join(dir, c)}
		if _, err := os.Lstat(paths[0]); errors.Is(err, fs.ErrNotExist) {
			// A Save replacing this step may have been interrupted with
			// the old checkpoint moved aside.
			if paths = asides(dir, c); len(paths) == 0 {
				note := fmt.Sprintf("%s, named by the pointer file, is missing", filepath.Join(dir, c))
				skipped = append(skipped, note)
				damaged = append(damaged, note)
				continue
			}
		}
		for _, path := range paths {
			// A checkpoint directory linking out of the model directory
			// is not this directory's checkpoint: an error, as a file
			// linking out of its checkpoint is.
			if err := fsutil.Inside(dir, path); errors.Is(err, fsutil.ErrOutside) {
				return nil, fmt.Errorf("checkpoint: %s cannot be read (only damaged checkpoints are skipped): %w", path, err)
			}
			r, err := open(path)
			if err == nil {
				r.skipped = skipped
				return r, nil
			}
			if unreadable(err) {
				return nil, fmt.Errorf("checkpoint: %s cannot be read (only damaged checkpoints are skipped): %w", path, err)
			}
			skipped = append(skipped, fmt.Sprintf("skipped damaged checkpoint %s: %v", path, err))
			damaged = append(damaged, fmt.Sprintf("%s: %v", filepath.Base(path), err))
		}
	}
	if len(damaged) > 0 {
		return nil, fmt.Errorf("checkpoint: %w in %s; each checkpoint and what is wrong with it:\n\t%s",
			ErrDamaged, dir, strings.Join(damaged, "\n\t"))
	}
	return nil, fmt.Errorf("checkpoint: %w in %s", ErrNoCheckpoint, dir)
}

// unreadable reports whether err, from reading a checkpoint, says that a
// file could not be read — permissions, an I/O error, something other than
// a regular file, a symbolic link out of the checkpoint — rather than that
// its content is damaged. A missing file is damage.
func unreadable(err error) bool {
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	var pe *fs.PathError
	return errors.As(err, &pe) || errors.Is(err, fsutil.ErrNotRegular) || errors.Is(err, fsutil.ErrOutside)
}

// asides returns the directories holding checkpoint name moved aside by an
// interrupted replacement.
func asides(dir, name string) []string {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, de := range des {
		if de.IsDir() && strings.HasPrefix(de.Name(), asidePrefix) && asideOf(de.Name()) == name {
			out = append(out, filepath.Join(dir, de.Name()))
		}
	}
	return out
}
