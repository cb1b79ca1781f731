// Package fsutil holds the durable-write steps checkpoints and exports share:
// create a file and fsync it, fsync a directory after renames in it.
package fsutil

import (
	"fmt"
	"os"
	"runtime"
)

// WriteFileSync creates path (it must not exist) with data and fsyncs it.
func WriteFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
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
