//go:build unix

package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/fifotest"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// failOpen makes openFile fail for path with errno, as a file without read
// permission does for a user other than root (the tests run as root in CI).
func failOpen(t *testing.T, path string, errno syscall.Errno) {
	t.Helper()
	prev := openFile
	openFile = func(dir, name string) (*os.File, fs.FileInfo, error) {
		if p := filepath.Join(dir, name); p == path {
			return nil, nil, &fs.PathError{Op: "open", Path: p, Err: errno}
		}
		return prev(dir, name)
	}
	t.Cleanup(func() { openFile = prev })
}

// failRead makes reading path fail with an I/O error after it opened: the
// file it gets is a directory, whose read fails.
func failRead(t *testing.T, path string) {
	t.Helper()
	prev := openFile
	openFile = func(dir, name string) (*os.File, fs.FileInfo, error) {
		f, fi, err := prev(dir, name)
		if err != nil || filepath.Join(dir, name) != path {
			return f, fi, err
		}
		f.Close()
		d, err := os.Open(dir)
		return d, fi, err
	}
	t.Cleanup(func() { openFile = prev })
}

// TestUnreadableFiles: a file of a checkpoint that cannot be read — no
// permission, an I/O error, a directory or a named pipe where a file
// belongs, a symbolic link out of the checkpoint — is an error naming it,
// both reading the checkpoint and reading the model directory, which does
// not fall back to an older checkpoint as it does for damage; nothing
// waits on a named pipe. Nothing in the directory changes.
func TestUnreadableFiles(t *testing.T) {
	const (
		varFile = "0001-dense~b.npy"
		ckpt    = "ckpt-3"
	)
	tests := []struct {
		name    string
		file    string // in ckpt, or the pointer file of the model directory
		make    func(t *testing.T, dir, path string)
		want    []string // besides the file's path
		whole   bool     // the checkpoint reads
		pointer bool     // the model directory's pointer file: Save fails too
	}{
		{"no permission to open a variable file", varFile, func(t *testing.T, _, p string) { failOpen(t, p, syscall.EACCES) },
			[]string{"permission denied"}, false, false},
		{"no permission to open the manifest", ManifestFile, func(t *testing.T, _, p string) { failOpen(t, p, syscall.EACCES) },
			[]string{"permission denied"}, false, false},
		{"no permission to open the pointer file", "", func(t *testing.T, _, p string) { failOpen(t, p, syscall.EACCES) },
			[]string{"permission denied"}, true, true},
		{"an I/O error opening a variable file", varFile, func(t *testing.T, _, p string) { failOpen(t, p, syscall.EIO) },
			[]string{"input/output error"}, false, false},
		{"an I/O error reading a variable file", varFile, func(t *testing.T, _, p string) { failRead(t, p) },
			[]string{"read", "is a directory"}, false, false},
		{"an I/O error reading the manifest", ManifestFile, func(t *testing.T, _, p string) { failRead(t, p) },
			[]string{"read", "is a directory"}, false, false},
		{"a directory where a variable file belongs", varFile, func(t *testing.T, _, p string) {
			must(t, os.Remove(p))
			must(t, os.Mkdir(p, 0o755))
		}, []string{"is a directory", "not a regular file"}, false, false},
		{"a named pipe where a variable file belongs", varFile, func(t *testing.T, _, p string) {
			must(t, os.Remove(p))
			fifotest.Make(t, p)
		}, []string{"is a named pipe", "not a regular file"}, false, false},
		{"a named pipe where the manifest belongs", ManifestFile, func(t *testing.T, _, p string) {
			must(t, os.Remove(p))
			fifotest.Make(t, p)
		}, []string{"is a named pipe", "not a regular file"}, false, false},
		{"a named pipe where the pointer file belongs", "", func(t *testing.T, _, p string) {
			must(t, os.Remove(p))
			fifotest.Make(t, p)
		}, []string{"is a named pipe", "not a regular file"}, true, true},
		{"a variable file linking out of its checkpoint", varFile, func(t *testing.T, dir, p string) {
			// To the same bytes in ckpt-2: only the link is wrong.
			must(t, os.Remove(p))
			must(t, os.Symlink(filepath.Join("..", "ckpt-2", varFile), p))
		}, []string{"outside"}, false, false},
		{"a variable file linking inside its checkpoint", varFile, func(t *testing.T, dir, p string) {
			must(t, os.Rename(p, p+".real"))
			must(t, os.Symlink(varFile+".real", p))
		}, nil, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, testVars[:3], 1)
			for step := int64(1); step <= 3; step++ {
				if _, err := Save(dir, s, step, 0); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, ckpt, tc.file)
			if tc.pointer {
				path = filepath.Join(dir, PointerFile)
			}
			tc.make(t, dir, path)
			before := listing(t, dir)

			_, err := Read(filepath.Join(dir, ckpt))
			if tc.whole && err != nil {
				t.Errorf("Read(%s): %v", ckpt, err)
			}
			if !tc.whole {
				wanterr.Mentions(t, err, append([]string{path}, tc.want...)...)
			}
			r, err := Read(dir)
			if tc.whole && !tc.pointer {
				if err != nil || r.Path() != filepath.Join(dir, ckpt) {
					t.Errorf("Read(model dir) = %v, %v; want %s", r, err, ckpt)
				}
			} else {
				if err == nil {
					t.Fatalf("Read(model dir) read %s, want an error naming %s", r.Path(), path)
				}
				wanterr.Mentions(t, err, append([]string{path}, tc.want...)...)
				if errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrDamaged) {
					t.Errorf("Read(model dir) = %v: a file that cannot be read is neither a fresh directory nor damage", err)
				}
			}
			if _, err := Latest(dir); (err == nil) != (tc.whole && !tc.pointer) {
				t.Errorf("Latest: %v", err)
			}
			if tc.pointer {
				if _, err := Save(dir, s, 4, 1); err == nil {
					t.Error("Save over a pointer file that cannot be read succeeded")
				} else {
					wanterr.Mentions(t, err, path)
				}
			}
			if diff := cmp.Diff(before, listing(t, dir)); diff != "" {
				t.Errorf("the model directory changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCheckpointDirLinkingOut: a checkpoint directory of a model directory
// that a symbolic link takes out of it is an error naming it, reading the
// model directory, rather than another directory's checkpoint restored
// silently; one that a link keeps inside reads, and so does a model
// directory reached through a link.
func TestCheckpointDirLinkingOut(t *testing.T) {
	tests := []struct {
		name string
		link func(t *testing.T, dir, outside string) // replaces dir/ckpt-3 with a link
		ok   bool
	}{
		{"absolute link out", func(t *testing.T, dir, outside string) {
			must(t, os.Rename(filepath.Join(dir, "ckpt-3"), filepath.Join(outside, "ckpt-3")))
			must(t, os.Symlink(filepath.Join(outside, "ckpt-3"), filepath.Join(dir, "ckpt-3")))
		}, false},
		{"relative link out", func(t *testing.T, dir, outside string) {
			must(t, os.Rename(filepath.Join(dir, "ckpt-3"), filepath.Join(outside, "ckpt-3")))
			rel, err := filepath.Rel(dir, filepath.Join(outside, "ckpt-3"))
			must(t, err)
			must(t, os.Symlink(rel, filepath.Join(dir, "ckpt-3")))
		}, false},
		{"link inside", func(t *testing.T, dir, _ string) {
			must(t, os.Mkdir(filepath.Join(dir, "kept"), 0o755))
			must(t, os.Rename(filepath.Join(dir, "ckpt-3"), filepath.Join(dir, "kept", "ckpt-3")))
			must(t, os.Symlink(filepath.Join("kept", "ckpt-3"), filepath.Join(dir, "ckpt-3")))
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			dir := filepath.Join(root, "model")
			s := newStore(t, testVars[:3], 1)
			for step := int64(1); step <= 3; step++ {
				if _, err := Save(dir, s, step, 0); err != nil {
					t.Fatal(err)
				}
			}
			tc.link(t, dir, outside)
			// Through a link to the model directory, the same.
			alias := filepath.Join(root, "alias")
			must(t, os.Symlink(dir, alias))
			for _, d := range []string{dir, alias} {
				ckpt := filepath.Join(d, "ckpt-3")
				r, err := Read(d)
				if tc.ok {
					if err != nil || r.Path() != ckpt {
						t.Errorf("Read(%s) = %v, %v; want %s", d, r, err, ckpt)
					}
					continue
				}
				if err == nil {
					t.Fatalf("Read(%s) read %s, want an error naming %s", d, r.Path(), ckpt)
				}
				wanterr.Mentions(t, err, ckpt, "outside")
				if errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrDamaged) {
					t.Errorf("Read(%s) = %v: a link out is neither a fresh directory nor damage", d, err)
				}
				if _, err := Latest(d); err == nil {
					t.Errorf("Latest(%s) succeeded", d)
				}
			}
		})
	}
}
