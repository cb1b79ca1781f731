package checkpoint

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestSaveReadBackComparesEveryByte: Save reads each file back and
// compares it with the variable it was written from: a byte flipped on
// disk anywhere in a variable's data (its first, a middle and its last
// byte, in a float32 matrix and in a bool vector) fails the Save, naming
// the file and the byte, and replaces and deletes nothing.
func TestSaveReadBackComparesEveryByte(t *testing.T) {
	tests := []struct {
		file string
		at   func(size, header int) int // the byte flipped
	}{
		{"0000-dense~w.npy", func(_, h int) int { return h }},
		{"0000-dense~w.npy", func(s, h int) int { return h + (s-h)/2 }},
		{"0000-dense~w.npy", func(s, _ int) int { return s - 1 }},
		{"0008-mask.npy", func(_, h int) int { return h + 2 }},
		{"0008-mask.npy", func(s, _ int) int { return s - 1 }},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		s := newStore(t, testVars, 1)
		if _, err := Save(dir, s, 1, 1); err != nil {
			t.Fatal(err)
		}
		r, err := Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(r.Path(), tc.file))
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(r.Path(), tc.file))
		if err != nil {
			t.Fatal(err)
		}
		hdr, err := readNPYHeader(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		off := tc.at(int(fi.Size()), int(hdr.Len))
		t.Run(fmt.Sprintf("%s/byte%d", tc.file, off), func(t *testing.T) {
			before := listing(t, dir)
			prev := openFile
			openFile = func(d, file string) (*os.File, fs.FileInfo, error) {
				if strings.HasPrefix(filepath.Base(d), tmpPrefix+Name(2)+"-") && file == tc.file {
					flip(t, filepath.Join(d, file), off)
				}
				return prev(d, file)
			}
			t.Cleanup(func() { openFile = prev })
			_, err := Save(dir, s, 2, 1)
			wanterr.Mentions(t, err, tc.file, fmt.Sprintf("corrupted: its byte %d differs from what was written", off), "nothing was replaced or deleted")
			if diff := cmp.Diff(before, listing(t, dir)); diff != "" {
				t.Errorf("the model directory changed (-before +after):\n%s", diff)
			}
		})
	}
}
