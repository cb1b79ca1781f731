package sharding_test

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/sharding"
)

// sparseFromBytes builds a sparse tensor from fuzz input: the rank, the
// dense shape (any int, overflowing ones included), then entries of rank
// coordinates (small, so that some are in range) and a value each.
func sparseFromBytes(b []byte) sharding.SparseCOO {
	next := func(n int) []byte {
		if len(b) < n {
			b = append(b, make([]byte, n-len(b))...)
		}
		out := b[:n]
		b = b[n:]
		return out
	}
	rank := int(next(1)[0]%4) + 1
	shape := make([]int, rank)
	for d := range shape {
		shape[d] = int(int64(binary.LittleEndian.Uint64(next(8))))
	}
	var indices [][]int
	var vals []float64
	for len(b) >= rank+1 && len(indices) < 256 {
		idx := make([]int, rank)
		for d, c := range next(rank) {
			idx[d] = int(int8(c))
		}
		indices = append(indices, idx)
		vals = append(vals, float64(int8(next(1)[0])))
	}
	return sharding.SparseCOO{Indices: indices, Values: tensor.New(tensor.WithShape(len(vals)), tensor.WithBacking(vals)), DenseShape: shape}
}

// FuzzSparse splits and densifies sparse tensors made from any bytes: an
// invalid one is an error (never a panic, never a huge allocation), and a
// valid one densifies to the rows of its shards' dense tensors, in order.
func FuzzSparse(f *testing.F) {
	le := func(vs ...int64) []byte {
		var out []byte
		for _, v := range vs {
			out = binary.LittleEndian.AppendUint64(out, uint64(v))
		}
		return out
	}
	f.Add(append(append([]byte{1}, le(4, 3)...), 0, 1, 5, 3, 2, 7), uint8(2))
	f.Add(append(append([]byte{1}, le(1<<32, 1<<32)...), 0, 0, 1), uint8(1))
	f.Add(append(append([]byte{1}, le(3, 1<<62)...), 0, 0, 1), uint8(3))
	f.Add(append(append([]byte{0}, le(5)...), 4, 1, 4, 2, 0, 3), uint8(5))
	f.Add(append(append([]byte{1}, le(2, -1)...), 0, 0, 1), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, shards uint8) {
		s := sparseFromBytes(data)
		n := int(shards%8) + 1
		parts, err := sharding.SplitSparse(s, n)
		if err != nil {
			return // invalid, or fewer rows than shards
		}
		if elems := 1; func() bool {
			for _, d := range s.DenseShape {
				if d > 1<<12 || elems*d > 1<<16 {
					return false
				}
				elems *= d
			}
			return true
		}() {
			whole, err := s.Dense()
			if err != nil {
				t.Fatalf("Dense of a sparse tensor SplitSparse accepted: %v", err)
			}
			dense := make([]*tensor.Dense, len(parts))
			for i, p := range parts {
				if dense[i], err = p.Dense(); err != nil {
					t.Fatalf("shard %d: %v", i, err)
				}
			}
			joined, err := sharding.Concat(dense)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(whole.Shape(), joined.Shape()); diff != "" {
				t.Fatalf("shards joined have another shape than the whole (-whole +joined):\n%s", diff)
			}
			if whole.Size() == 0 {
				return // gorgonia's Data panics on an empty tensor
			}
			if diff := cmp.Diff(whole.Data(), joined.Data()); diff != "" {
				t.Errorf("shards joined differ from the whole (-whole +joined):\n%s", diff)
			}
		}
	})
}
