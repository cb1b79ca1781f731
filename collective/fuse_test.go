package collective_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/collective"
)

// TestFusion: slices of every kind, scaled, summed over the ranks through
// buckets of any size, the same as summing each slice alone; and the
// buckets reused from call to call.
func TestFusion(t *testing.T) {
	type slices struct {
		A []float32
		B []float64
		C []int64
		D []float32
		E []int
		F []int32
	}
	// rank r's values: r+1 times a pattern, each segment scaled by 0.5
	// except the integer ones.
	of := func(r int) slices {
		k := float64(r + 1)
		s := slices{A: make([]float32, 37), B: make([]float64, 5), C: []int64{int64(r), 1}, D: make([]float32, 3), E: []int{r}, F: []int32{int32(r) * 3}}
		for i := range s.A {
			s.A[i] = float32(k * float64(i))
		}
		for i := range s.B {
			s.B[i] = k / float64(i+1)
		}
		for i := range s.D {
			s.D[i] = float32(k)
		}
		return s
	}
	for _, ranks := range []int{1, 2, 3} {
		want := slices{A: make([]float32, 37), B: make([]float64, 5), C: make([]int64, 2), D: make([]float32, 3), E: make([]int, 1), F: make([]int32, 1)}
		for r := range ranks {
			s := of(r)
			for i, v := range s.A {
				want.A[i] += float32(0.5 * float64(v))
			}
			for i, v := range s.B {
				want.B[i] += 0.5 * v
			}
			for i, v := range s.C {
				want.C[i] += v
			}
			for i, v := range s.D {
				want.D[i] += float32(0.5 * float64(v))
			}
			want.E[0] += s.E[0]
			want.F[0] += s.F[0]
		}
		for _, bucket := range []int{0, 4, 8, 24, 100, 1 << 20} {
			t.Run(fmt.Sprintf("ranks%d_bucket%d", ranks, bucket), func(t *testing.T) {
				got := make([]slices, ranks)
				errs := onRanks(ranks, func(c collective.Comm) error {
					f := collective.Fusion{BucketBytes: bucket}
					for range 2 { // the second call reuses the buffers
						s := of(c.Rank())
						segs := []collective.Segment{{Data: s.A, Scale: 0.5}, {Data: s.B, Scale: 0.5}, {Data: s.C, Scale: 1}, {Data: s.D, Scale: 0.5}, {Data: s.E, Scale: 1}, {Data: s.F, Scale: 1}}
						if err := f.AllReduce(context.Background(), c, segs); err != nil {
							return err
						}
						got[c.Rank()] = s
					}
					return nil
				})
				for r := range ranks {
					if errs[r] != nil {
						t.Fatalf("rank %d: %v", r, errs[r])
					}
					if d := cmp.Diff(want, got[r]); d != "" {
						t.Errorf("rank %d (-want +got):\n%s", r, d)
					}
				}
			})
		}
	}
	err := new(collective.Fusion).AllReduce(context.Background(), collective.Local(1)[0], []collective.Segment{{Data: []bool{true}, Scale: 1}})
	if err == nil {
		t.Error("a []bool segment: no error")
	}
}
