//go:build unix

package fsutil_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/towerflow/towerflow/internal/fifotest"
	"github.com/towerflow/towerflow/internal/fsutil"
	"github.com/towerflow/towerflow/internal/wanterr"
)

func TestOpenRegular(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir, outside string) // makes dir/sub/f
		is    error                                   // nil: opens and reads "data"
		want  []string                                // substrings of the error
	}{
		{"regular file", func(t *testing.T, dir, _ string) { write(t, filepath.Join(dir, "sub", "f")) }, nil, nil},
		{"link to a file inside", func(t *testing.T, dir, _ string) {
			write(t, filepath.Join(dir, "g"))
			link(t, "../g", filepath.Join(dir, "sub", "f"))
		}, nil, nil},
		{"link to a file outside", func(t *testing.T, dir, outside string) {
			write(t, filepath.Join(outside, "g"))
			link(t, filepath.Join(outside, "g"), filepath.Join(dir, "sub", "f"))
		}, fsutil.ErrOutside, []string{filepath.Join("sub", "f"), "outside"}},
		{"relative link out of the directory", func(t *testing.T, dir, outside string) {
			write(t, filepath.Join(outside, "g"))
			rel, err := filepath.Rel(filepath.Join(dir, "sub"), filepath.Join(outside, "g"))
			if err != nil {
				t.Fatal(err)
			}
			link(t, rel, filepath.Join(dir, "sub", "f"))
		}, fsutil.ErrOutside, []string{filepath.Join("sub", "f"), "outside"}},
		{"directory link out of the directory", func(t *testing.T, dir, outside string) {
			must(t, os.Remove(filepath.Join(dir, "sub")))
			write(t, filepath.Join(outside, "f"))
			link(t, outside, filepath.Join(dir, "sub"))
		}, fsutil.ErrOutside, []string{filepath.Join("sub", "f"), "outside"}},
		{"directory", func(t *testing.T, dir, _ string) { must(t, os.Mkdir(filepath.Join(dir, "sub", "f"), 0o755)) },
			fsutil.ErrNotRegular, []string{filepath.Join("sub", "f"), "is a directory"}},
		{"named pipe", func(t *testing.T, dir, _ string) { fifotest.Make(t, filepath.Join(dir, "sub", "f")) },
			fsutil.ErrNotRegular, []string{filepath.Join("sub", "f"), "is a named pipe"}},
		{"link to a named pipe", func(t *testing.T, dir, _ string) {
			fifotest.Make(t, filepath.Join(dir, "p"))
			link(t, "../p", filepath.Join(dir, "sub", "f"))
		}, fsutil.ErrNotRegular, []string{filepath.Join("sub", "f"), "is a named pipe"}},
		{"missing", func(*testing.T, string, string) {}, fs.ErrNotExist, []string{filepath.Join("sub", "f")}},
		{"dangling link", func(t *testing.T, dir, _ string) { link(t, "nope", filepath.Join(dir, "sub", "f")) },
			fs.ErrNotExist, []string{filepath.Join("sub", "f")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
			tc.setup(t, dir, outside)
			f, fi, err := fsutil.OpenRegular(dir, "sub/f")
			if tc.is == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if fi.Size() != 4 {
					t.Errorf("size %d, want 4", fi.Size())
				}
				b, err := fsutil.ReadRegular(dir, "sub/f")
				if err != nil || string(b) != "data" {
					t.Errorf("ReadRegular = %q, %v; want \"data\"", b, err)
				}
				return
			}
			if err == nil {
				f.Close()
				t.Fatalf("opened, want an error wrapping %v", tc.is)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %v, want one wrapping %v", err, tc.is)
			}
			wanterr.Mentions(t, err, tc.want...)
			if _, err := fsutil.ReadRegular(dir, "sub/f"); !errors.Is(err, tc.is) {
				t.Errorf("ReadRegular: %v, want an error wrapping %v", err, tc.is)
			}
		})
	}
}

func write(t *testing.T, p string) { must(t, os.WriteFile(p, []byte("data"), 0o644)) }

func link(t *testing.T, target, p string) { must(t, os.Symlink(target, p)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
