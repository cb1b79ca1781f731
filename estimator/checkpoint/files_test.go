package checkpoint

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFileModes: every file of a model directory, the pointer file
// included, has the mode os.WriteFile(name, data, 0o644) gives under the
// process's umask, like the files TensorFlow writes.
func TestFileModes(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, testVars[:3], 1)
	for step := int64(1); step <= 2; step++ { // the second save replaces the pointer
		if _, err := Save(dir, s, step, 0); err != nil {
			t.Fatal(err)
		}
	}
	ref := filepath.Join(t.TempDir(), "ref")
	must(t, os.WriteFile(ref, nil, 0o644))
	fi, err := os.Stat(ref)
	must(t, err)
	want := map[string]fs.FileMode{}
	got := map[string]fs.FileMode{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[rel], want[rel] = info.Mode(), fi.Mode()
		return nil
	})
	must(t, err)
	if _, ok := got[PointerFile]; !ok {
		t.Fatalf("no pointer file among %v", got)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("file modes (-want +got):\n%s", diff)
	}
}
