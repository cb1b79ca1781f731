//go:build !race

// The race detector adds allocations: these counts hold without it.

package dataset

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestCSVReaderAllocations counts Next's allocations a row: with
// ReuseExample, only encoding/csv's one (the row's text), whatever the
// number of rows read before; a new Example costs its map and a few
// shares of slabs.
func TestCSVReaderAllocations(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,age,name\n")
	for range 2000 {
		b.WriteString("12345,6.5,a name of some length\n")
	}
	dir := writeFiles(t, map[string]string{"data.csv": b.String()})
	for _, tt := range []struct {
		reuse bool
		most  float64
	}{{true, 1}, {false, 5}} {
		r, err := NewCSVReader([]string{filepath.Join(dir, "data.csv")}, CSVOptions{Schema: people, ReuseExample: tt.reuse})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Next(); err != nil { // opens the file
			t.Fatal(err)
		}
		got := testing.AllocsPerRun(1000, func() {
			if _, err := r.Next(); err != nil && err != io.EOF {
				t.Fatal(err)
			}
		})
		if got > tt.most {
			t.Errorf("ReuseExample %v: %v allocations a row, want at most %v", tt.reuse, got, tt.most)
		}
		r.Close()
	}
}
