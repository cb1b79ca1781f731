package vec

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// channels covers the Go loops alone (fewer than 8), whole vectors of one
// to four (one pass of the assembly), more than four (two passes), and
// vectors with channels left for Go.
var channels = []int{1, 3, 5, 8, 9, 16, 21, 24, 32, 40, 64, 67}

// rowCounts covers one row and more rows than one block holds.
var rowCounts = []int{1, 2, 7, 300}

// column returns channel ch of the rows of x, c channels to a row.
func column(x []float32, c, ch int) []float32 {
	col := make([]float32, len(x)/c)
	for r := range col {
		col[r] = x[r*c+ch]
	}
	return col
}

// TestRowsMatchChannels: each Rows function, in assembly and in Go, gives
// for every channel the bits of the same computation on that channel's
// values alone: the elementwise function on its column, and the sums of
// its column added in order, in float32. The specials mixed into the
// inputs are compared as in TestElementwiseMatchesGo; the sums' NaNs
// alike.
func TestRowsMatchChannels(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	// params returns n values per channel for c channels.
	params := func(n, c int) [][]float32 {
		p := make([][]float32, n)
		for i := range p {
			p[i] = data(r, c, false)
		}
		return p
	}
	type impl struct {
		name string
		run  func(f func())
	}
	impls := []impl{{"assembly", func(f func()) { f() }}, {"go", withGo}}
	funcs := []struct {
		name string
		// run computes over x and y (c channels to a row) into o; want
		// computes channel ch alone into its column of want.
		run  func(o, x, y []float32, p [][]float32)
		want func(col, xc, yc []float32, p [][]float32, ch int)
		same cmp.Option
	}{
		{
			"AffineRows",
			func(o, x, _ []float32, p [][]float32) { AffineRows(o, x, p[0], p[1], p[2], p[3], false) },
			func(col, xc, _ []float32, p [][]float32, ch int) {
				Affine(col, xc, p[0][ch], p[1][ch], p[2][ch], p[3][ch], false)
			},
			sameBits,
		},
		{
			"AffineRows relu",
			func(o, x, _ []float32, p [][]float32) { AffineRows(o, x, p[0], p[1], p[2], p[3], true) },
			func(col, xc, _ []float32, p [][]float32, ch int) {
				Affine(col, xc, p[0][ch], p[1][ch], p[2][ch], p[3][ch], true)
			},
			sameBits,
		},
		{
			"ProjectRows",
			func(o, x, y []float32, p [][]float32) { copy(o, y); ProjectRows(o, x, p[0], p[1], p[2], p[3]) },
			func(col, xc, yc []float32, p [][]float32, ch int) {
				copy(col, yc)
				Project(col, xc, p[0][ch], p[1][ch], p[2][ch], p[3][ch])
			},
			nanAlike,
		},
		{
			"ProjectRowsFrom",
			func(o, x, y []float32, p [][]float32) { ProjectRowsFrom(o, y, x, p[0], p[1], p[2], p[3]) },
			func(col, xc, yc []float32, p [][]float32, ch int) {
				copy(col, yc)
				Project(col, xc, p[0][ch], p[1][ch], p[2][ch], p[3][ch])
			},
			nanAlike,
		},
		{
			"SumsAboutRows",
			func(o, x, _ []float32, p [][]float32) {
				c := len(p[0])
				SumsAboutRows(x, p[0], o[:c], o[c:2*c])
			},
			func(col, xc, _ []float32, p [][]float32, ch int) {
				var s, ss float32
				for _, v := range xc {
					d := v - p[0][ch]
					s += d
					ss += float32(d * d)
				}
				col[0], col[1] = s, ss
			},
			nanAlike,
		},
		{
			"SumAndDotAboutRows",
			func(o, x, y []float32, p [][]float32) {
				c := len(p[0])
				SumAndDotAboutRows(y, x, p[0], o[:c], o[c:2*c])
			},
			func(col, xc, yc []float32, p [][]float32, ch int) {
				var s, sx float32
				for i, v := range yc {
					s += v
					sx += float32(v * (xc[i] - p[0][ch]))
				}
				col[0], col[1] = s, sx
			},
			nanAlike,
		},
	}
	for _, f := range funcs {
		sums := f.name == "SumsAboutRows" || f.name == "SumAndDotAboutRows"
		for _, c := range channels {
			for _, rows := range rowCounts {
				for _, special := range []bool{false, true} {
					n := rows * c
					x, y := data(r, n+1, special)[1:], data(r, n+1, special)[1:]
					p := params(4, c)
					// The reference, channel by channel; the sums are laid
					// out as the functions write them: every channel's
					// first sum, then every channel's second.
					l := n
					if sums {
						l = max(n, 2*c)
					}
					want := make([]float32, l+2)
					for i := range want {
						want[i] = 42
					}
					for ch := range c {
						if sums {
							var two [2]float32
							f.want(two[:], column(x, c, ch), column(y, c, ch), p, ch)
							want[1+ch], want[1+c+ch] = two[0], two[1]
							continue
						}
						col := make([]float32, rows)
						f.want(col, column(x, c, ch), column(y, c, ch), p, ch)
						for i, v := range col {
							want[1+i*c+ch] = v
						}
					}
					if sums {
						clear(want[1+2*c : l+1])
					}
					for _, im := range impls {
						t.Run(fmt.Sprintf("%s/c=%d/rows=%d/special=%v/%s", f.name, c, rows, special, im.name), func(t *testing.T) {
							got := make([]float32, l+2)
							for i := range got {
								got[i] = 42
							}
							if sums {
								// The sums overwrite what was there.
								for i := 1; i <= 2*c; i++ {
									got[i] = 7
								}
								clear(got[1+2*c : l+1])
							}
							im.run(func() { f.run(got[1:l+1], x, y, p) })
							if diff := cmp.Diff(want, got, f.same); diff != "" {
								t.Errorf("(-per channel +rows)\n%s", diff)
							}
						})
					}
				}
			}
		}
	}
}

// TestRowsFloat64: the float64 loops, which run in Go, against the same
// loops on float32 values widened, where every result is exact: small
// integers.
func TestRowsFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const c, rows = 11, 9
	x32, y32 := make([]float32, c*rows), make([]float32, c*rows)
	for i := range x32 {
		x32[i], y32[i] = float32(r.IntN(9)-4), float32(r.IntN(9)-4)
	}
	p32 := [4][]float32{{1, 2, 3, -1, -2, 0, 1, 1, 2, 3, 4}, {2, 1, 1, -1, 1, 2, 1, 1, 2, 1, 1}, {1, -1, 2, 1, 1, 1, 2, 1, 1, 1, 2}, {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2}}
	wide := func(v []float32) []float64 {
		w := make([]float64, len(v))
		for i, f := range v {
			w[i] = float64(f)
		}
		return w
	}
	x64, y64 := wide(x32), wide(y32)
	var p64 [4][]float64
	for i := range p32 {
		p64[i] = wide(p32[i])
	}
	o32, o64 := make([]float32, c*rows), make([]float64, c*rows)
	var got, want [][]float64
	AffineRows(o32, x32, p32[0], p32[1], p32[2], p32[3], true)
	AffineRows(o64, x64, p64[0], p64[1], p64[2], p64[3], true)
	want, got = append(want, wide(o32)), append(got, slices.Clone(o64))
	copy(o32, y32)
	copy(o64, y64)
	ProjectRows(o32, x32, p32[0], p32[1], p32[2], p32[3])
	ProjectRows(o64, x64, p64[0], p64[1], p64[2], p64[3])
	want, got = append(want, wide(o32)), append(got, slices.Clone(o64))
	SumsAboutRows(x32, p32[0], o32[:c], o32[c:2*c])
	SumsAboutRows(x64, p64[0], o64[:c], o64[c:2*c])
	want, got = append(want, wide(o32[:2*c])), append(got, slices.Clone(o64[:2*c]))
	SumAndDotAboutRows(y32, x32, p32[0], o32[:c], o32[c:2*c])
	SumAndDotAboutRows(y64, x64, p64[0], o64[:c], o64[c:2*c])
	want, got = append(want, wide(o32[:2*c])), append(got, slices.Clone(o64[:2*c]))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-float32 +float64)\n%s", diff)
	}
}

// TestMaskSumAndDotAboutRows: the fused pass, in assembly and in Go, gives
// the bits of Mask (or a copy) followed by SumAndDotAboutRows in Go, on
// every channel count, with the specials mixed in.
func TestMaskSumAndDotAboutRows(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range channels {
		for _, rows := range rowCounts {
			for _, relu := range []bool{false, true} {
				n := rows * c
				y, g, x, m := data(r, n, true), data(r, n, true), data(r, n, true), data(r, c, false)
				want := make([]float32, n+2*c)
				withGo(func() {
					if relu {
						Mask(want[:n], y, g)
					} else {
						copy(want[:n], g)
					}
					SumAndDotAboutRows(want[:n], x, m, want[n:n+c], want[n+c:])
				})
				for _, im := range []struct {
					name string
					run  func(func())
				}{{"assembly", func(f func()) { f() }}, {"go", withGo}} {
					t.Run(fmt.Sprintf("c=%d/rows=%d/relu=%t/%s", c, rows, relu, im.name), func(t *testing.T) {
						got := make([]float32, n+2*c)
						for i := range got {
							got[i] = 42
						}
						im.run(func() { MaskSumAndDotAboutRows(got[:n], y, g, x, m, got[n:n+c], got[n+c:], relu) })
						if diff := cmp.Diff(want, got, nanAlike); diff != "" {
							t.Errorf("(-mask then sums +fused)\n%s", diff)
						}
					})
				}
			}
		}
	}
}
