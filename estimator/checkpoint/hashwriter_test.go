package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// shortWriter writes at most limit bytes in all, and then reports no
// error, as a faulty writer would.
type shortWriter struct {
	buf   bytes.Buffer
	limit int
}

func (w *shortWriter) Write(p []byte) (int, error) {
	n := min(len(p), w.limit-w.buf.Len())
	w.buf.Write(p[:n])
	return n, nil
}

// TestHashWriter: what hashWriter writes, hashes and counts agree, for
// small writes and for large ones hashed while they are written, and a
// short write is an error.
func TestHashWriter(t *testing.T) {
	chunk := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*31) + seed
		}
		return b
	}
	tests := []struct {
		name    string
		writes  [][]byte
		limit   int // of the file; 0: none
		wantErr error
	}{
		{"small", [][]byte{chunk(10, 1), chunk(0, 2), chunk(1000, 3)}, 0, nil},
		{"large", [][]byte{chunk(overlapMin, 1)}, 0, nil},
		{"mixed", [][]byte{chunk(64, 1), chunk(3*overlapMin+5, 2), chunk(7, 3)}, 0, nil},
		{"short small", [][]byte{chunk(100, 1)}, 50, io.ErrShortWrite},
		{"short large", [][]byte{chunk(2*overlapMin, 1)}, overlapMin, io.ErrShortWrite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := tt.limit
			if limit == 0 {
				limit = 1 << 30
			}
			file := &shortWriter{limit: limit}
			hw := &hashWriter{w: file, h: sha256.New()}
			var err error
			for _, p := range tt.writes {
				if _, err = hw.Write(p); err != nil {
					break
				}
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			want := sha256.Sum256(bytes.Join(tt.writes, nil))
			if diff := cmp.Diff(want[:], hw.h.Sum(nil)); diff != "" {
				t.Errorf("hash (-want +got):\n%s", diff)
			}
			if got := hw.n; got != int64(file.buf.Len()) {
				t.Errorf("counted %d bytes, wrote %d", got, file.buf.Len())
			}
			if !bytes.Equal(file.buf.Bytes(), bytes.Join(tt.writes, nil)) {
				t.Errorf("wrote other bytes than given")
			}
		})
	}
}
