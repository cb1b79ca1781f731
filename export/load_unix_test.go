//go:build unix

package export_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/fifotest"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TestLoadOpensOnlyRegularFiles: a named pipe, a directory where a file of
// the export belongs, or a symbolic link out of the version directory, is
// an error naming the file; Load never waits on a named pipe.
func TestLoadOpensOnlyRegularFiles(t *testing.T) {
	_, src := exportLinreg(t)
	linear := replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	replace := func(t *testing.T, p string, with func(p string)) {
		t.Helper()
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		with(p)
	}
	fifo := func(t *testing.T) func(string) { return func(p string) { fifotest.Make(t, p) } }
	tests := []struct {
		name   string
		change func(t *testing.T, dir string) string // returns the path the error names
		want   []string
	}{
		{"a named pipe for a variable file", func(t *testing.T, dir string) string {
			p := variableFile(t, dir, "w")
			replace(t, p, fifo(t))
			return p
		}, []string{"is a named pipe", "not a regular file"}},
		{"a named pipe for the signatures", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, exportdir.SignaturesFile)
			replace(t, p, fifo(t))
			return p
		}, []string{"is a named pipe", "not a regular file"}},
		{"a named pipe for the manifest", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, exportdir.ManifestFile)
			replace(t, p, fifo(t))
			return p
		}, []string{"is a named pipe", "not a regular file"}},
		{"a named pipe for the variables' pointer file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, exportdir.VariablesDir, checkpoint.PointerFile)
			replace(t, p, fifo(t))
			return p
		}, []string{"is a named pipe", "not a regular file"}},
		{"a directory for the signatures", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, exportdir.SignaturesFile)
			replace(t, p, func(p string) {
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
			})
			return p
		}, []string{"is a directory"}},
		{"a variable file linking out of the version", func(t *testing.T, dir string) string {
			// To the same bytes in the original: only the link is wrong.
			p := variableFile(t, dir, "w")
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				t.Fatal(err)
			}
			replace(t, p, func(p string) {
				if err := os.Symlink(filepath.Join(src, rel), p); err != nil {
					t.Fatal(err)
				}
			})
			return p
		}, []string{"outside"}},
		{"the signatures linking out of the version", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, exportdir.SignaturesFile)
			replace(t, p, func(p string) {
				if err := os.Symlink(filepath.Join(src, exportdir.SignaturesFile), p); err != nil {
					t.Fatal(err)
				}
			})
			return p
		}, []string{"outside"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyVersion(t, src, "1")
			path := tc.change(t, dir)
			p, err := export.Load(dir, linear)
			if err == nil {
				p.Close()
				t.Fatalf("Load succeeded, want an error naming %s", path)
			}
			wanterr.Mentions(t, err, append([]string{path}, tc.want...)...)
		})
	}
}
