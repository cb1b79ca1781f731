package checkpoint

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/wanterr"
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

// corruptWrites makes the files Save writes for step read back with one
// byte flipped, as a disk that corrupts what it stores would: openFile
// flips the last byte of file name of the temporary checkpoint on disk
// before opening it.
func corruptWrites(t *testing.T, step int64, name string) {
	t.Helper()
	prev := openFile
	openFile = func(dir, file string) (*os.File, fs.FileInfo, error) {
		if strings.HasPrefix(filepath.Base(dir), tmpPrefix+Name(step)+"-") && file == name {
			flip(t, filepath.Join(dir, file), -1)
		}
		return prev(dir, file)
	}
	t.Cleanup(func() { openFile = prev })
}

// TestSaveVerifiesBeforeCleanup: a Save whose checkpoint does not read
// back whole fails, naming the file, and replaces and deletes nothing: the
// newest checkpoint that verifies stays, even with keep 1.
func TestSaveVerifiesBeforeCleanup(t *testing.T) {
	tests := []struct {
		name string
		step int64 // the step of the Save that goes wrong
	}{
		{"a new step", 4},
		{"replacing a step", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, testVars[:3], 1)
			for step := int64(1); step <= 3; step++ {
				if _, err := Save(dir, s, step, 1); err != nil {
					t.Fatal(err)
				}
			}
			before := listing(t, dir)
			corruptWrites(t, tc.step, "0001-dense~b.npy")
			_, err := Save(dir, newStore(t, testVars[:3], 2), tc.step, 1)
			wanterr.Mentions(t, err, "0001-dense~b.npy", "corrupted", "nothing was replaced or deleted")
			if diff := cmp.Diff(before, listing(t, dir)); diff != "" {
				t.Errorf("the model directory changed (-before +after):\n%s", diff)
			}
			r, err := Read(dir)
			if err != nil || r.Step() != 3 {
				t.Fatalf("Read(model dir) = %v, %v; want ckpt-3", r, err)
			}
		})
	}
}

// listing returns every path under dir with its type and size.
func listing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fi.Mode().Type().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] += " " + string(b)
		}
		return nil
	})
	must(t, err)
	return out
}
