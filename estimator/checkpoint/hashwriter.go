package checkpoint

import (
	"hash"
	"io"
)

// overlapMin is the size from which hashWriter hashes a write on another
// goroutine while it writes it.
const overlapMin = 1 << 20

// hashWriter writes to w, hashes what it writes with h and counts it: the
// file, its SHA-256 and its size in one pass over a variable's data. A large
// write (a table's data, which writeNPY passes whole from the variable's
// backing) is hashed on another goroutine while w writes it, so that Save
// takes about the longer of writing and hashing rather than their sum.
type hashWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (hw *hashWriter) Write(p []byte) (int, error) {
	var n int
	var err error
	if len(p) < overlapMin {
		n, err = hw.w.Write(p)
		hw.h.Write(p[:n])
	} else {
		// Neither goroutine writes p, which the caller keeps unchanged
		// until Write returns. The hash covers p whole even when the
		// write is short; that fails the Save, whose temporary directory
		// is then removed.
		hashed := make(chan struct{})
		go func() {
			hw.h.Write(p)
			close(hashed)
		}()
		n, err = hw.w.Write(p)
		<-hashed
	}
	hw.n += int64(n)
	if n < len(p) && err == nil {
		err = io.ErrShortWrite
	}
	return n, err
}
