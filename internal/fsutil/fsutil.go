// Package fsutil holds the file steps checkpoints and exports share: the
// durable writes (create a file and fsync it, replace a file atomically,
// fsync a directory after renames in it) and the careful reads (open a file
// only when it is a regular one inside its directory).
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// WriteFileSync creates path (it must not exist) with data and fsyncs it.
func WriteFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	return writeSyncClose(f, data)
}

// ReplaceFile replaces dir/name with data atomically: a temporary file
// named by pattern (as os.CreateTemp takes it: its last '*' becomes a
// random number), written and fsynced, renamed over name, then the
// directory fsynced. The file gets mode 0o644 less the umask, as
// WriteFileSync's files do (os.CreateTemp would give 0o600).
func ReplaceFile(dir, name, pattern string, data []byte) error {
	f, err := createTemp(dir, pattern)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly once renamed
	if err := writeSyncClose(f, data); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return SyncDir(dir)
}

// createTemp is os.CreateTemp with the permissions of WriteFileSync.
func createTemp(dir, pattern string) (*os.File, error) {
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for {
		p := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
}

// writeSyncClose writes data to f, fsyncs and closes it.
func writeSyncClose(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SyncDir fsyncs a directory so that renames and creations in it are
// durable. Windows cannot open directories for syncing; there it is a no-op.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
