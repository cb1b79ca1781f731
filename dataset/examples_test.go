package dataset

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/tfrecord"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestExampleReader reads the tf.Examples of files one after the other
// (patterns in lexical order, compressed files by their names with
// AutoCompression), goes on past a record that is not a tf.Example, and
// stops at a damaged record or a missing file with an error naming it.
func TestExampleReader(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, ids ...int64) string {
		path := filepath.Join(dir, name)
		w, err := CreateRecords(path, AutoCompression)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := w.WriteExample(Example{"id": {Int64s: []int64{id}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := write("a.tfrecord", 1, 2)
	b := write("b.tfrecord.gz", 3)
	write("c.tfrecord.zz", 4, 5)
	notExample := filepath.Join(dir, "bad.tfrecord")
	data := append(tfrecord.AppendRecord(nil, []byte("\xff\xff not a tf.Example")), tfrecord.AppendRecord(nil, mustExample(t, Example{"id": {Int64s: []int64{6}}}))...)
	if err := os.WriteFile(notExample, data, 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, "damaged.tfrecord")
	if err := os.WriteFile(damaged, append(tfrecord.AppendRecord(nil, mustExample(t, Example{"id": {Int64s: []int64{7}}})), "garbage, not a record"...), 0o644); err != nil {
		t.Fatal(err)
	}
	auto := RecordOptions{Compression: AutoCompression}
	for _, tc := range []struct {
		name  string
		files []string
		opts  RecordOptions
		ids   []int64  // the ids read, in order
		errs  []string // what the error ending it says ("" for io.EOF), then what the errors read on the way say
	}{
		{"files and patterns", []string{b, filepath.Join(dir, "[ac].tfrecord*")}, auto, []int64{3, 1, 2, 4, 5}, []string{""}},
		{"a record that is not a tf.Example", []string{notExample, a}, auto, []int64{6, 1, 2}, []string{"", notExample + ": record 0 at byte 0", "malformed tf.Example"}},
		{"a damaged record", []string{damaged, a}, auto, []int64{7}, []string{damaged + ": record 1 at byte", "corrupt record"}},
		{"a compressed file read as plain", []string{b}, RecordOptions{}, nil, []string{b + ": record 0 at byte 0", "starts as a gzip stream"}},
		{"a missing file", []string{a, filepath.Join(dir, "missing.tfrecord")}, auto, nil, []string{"missing.tfrecord"}},
		{"a pattern matching nothing", []string{filepath.Join(dir, "*.csv")}, auto, nil, []string{`matches no file`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewExampleReader(tc.files, tc.opts)
			if err != nil {
				wanterr.Mentions(t, err, tc.errs...)
				return
			}
			defer r.Close()
			var ids []int64
			var end error
			var seen []error
			for i := 0; ; i++ {
				if i > 100 {
					t.Fatalf("Next did not end after %d calls (ids %v, errors %v)", i, ids, seen)
				}
				ex, err := r.Next()
				if errors.Is(err, ErrMalformed) {
					seen = append(seen, err)
					continue
				}
				if err != nil {
					end = err
					break
				}
				ids = append(ids, ex["id"].Int64s[0])
			}
			if diff := cmp.Diff(tc.ids, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if want := min(len(tc.errs)-1, 1); tc.errs[0] == "" && len(seen) != want || tc.errs[0] != "" && len(seen) != 0 {
				t.Fatalf("errors on the way %v, want %d", seen, want)
			}
			if tc.errs[0] == "" {
				if end != io.EOF {
					t.Errorf("ended with %v, want io.EOF", end)
				}
				if len(seen) > 0 {
					wanterr.Mentions(t, seen[0], tc.errs[1:]...)
				}
			} else {
				wanterr.Mentions(t, end, tc.errs...)
				if _, again := r.Next(); again != end {
					t.Errorf("Next after the error: %v, want the same error %v", again, end)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Next(); err == nil || err == io.EOF && tc.errs[0] == "" {
				t.Errorf("Next after Close: %v, want an error", err)
			}
		})
	}
}

func mustExample(t *testing.T, ex Example) []byte {
	t.Helper()
	b, err := AppendExample(nil, ex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
