package fsutil_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/fsutil"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestReadAtMost: a file up to the limit reads whole; a larger one is an
// error naming it and the limit, refused by its size without being read: a
// sparse file of a terabyte costs nothing.
func TestReadAtMost(t *testing.T) {
	const limit = 1 << 10
	tests := []struct {
		name string
		size int64
		ok   bool
	}{
		{"empty", 0, true},
		{"at the limit", limit, true},
		{"one byte over", limit + 1, false},
		{"a sparse terabyte", 1 << 40, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "meta.json")
			want := bytes.Repeat([]byte("x"), int(min(tt.size, limit)))
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, tt.size); err != nil {
				t.Fatal(err)
			}
			got, err := fsutil.ReadRegularAtMost(dir, "meta.json", limit)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("read (-want +got):\n%s", diff)
				}
				return
			}
			wanterr.Mentions(t, err, fmt.Sprintf("%s is over %d bytes: damaged?", p, limit))
		})
	}
}
