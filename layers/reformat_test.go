package layers_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
)

// TestReformat checks Reformat's values and gradient against gorgonia's
// G.Transpose, exactly: a reordering moves values and computes nothing.
// The shapes cross the 32×32 tiles transposeImages walks in a wide image
// (TestTransposeImages covers its blocks of rows).
func TestReformat(t *testing.T) {
	for _, tc := range []struct {
		from, to layers.Format
		in       tensor.Shape
		axes     []int // G.Transpose's
	}{
		{layers.NCHW, layers.NHWC, tensor.Shape{2, 3, 5, 7}, []int{0, 2, 3, 1}},
		{layers.NCHW, layers.NHWC, tensor.Shape{2, 40, 6, 9}, []int{0, 2, 3, 1}},
		{layers.NHWC, layers.NCHW, tensor.Shape{2, 5, 7, 3}, []int{0, 3, 1, 2}},
		{layers.NHWC, layers.NCHW, tensor.Shape{3, 6, 9, 33}, []int{0, 3, 1, 2}},
	} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("%v→%v %v %v", tc.from, tc.to, tc.in, dt), func(t *testing.T) {
				n, c, h, w := imagesDims(tc.from, tc.in)
				out := imagesShape(tc.to, n, c, h, w)
				shapes := []tensor.Shape{tc.in, out}
				ours := build(t, dt, shapes, func(in []*G.Node) (*G.Node, error) {
					y, err := layers.Reformat(in[0], tc.from, tc.to)
					if err != nil {
						return nil, err
					}
					if !y.Shape().Eq(out) {
						return nil, fmt.Errorf("output shape %v, want %v", y.Shape(), out)
					}
					return layers.MeanSquaredError(y, in[1])
				})
				theirs := build(t, dt, shapes, func(in []*G.Node) (*G.Node, error) {
					y, err := G.Transpose(in[0], tc.axes...)
					if err != nil {
						return nil, err
					}
					return layers.MeanSquaredError(y, in[1])
				})
				rng := rand.New(rand.NewPCG(1, 2))
				for run := range 2 {
					vs := randomValues(rng, dt, shapes)
					if diff := cmp.Diff(theirs.run(t, vs), ours.run(t, vs)); diff != "" {
						t.Errorf("run %d: loss and gradients (-gorgonia +Reformat):\n%s", run, diff)
					}
				}
			})
		}
	}
}

func TestReformatSameFormat(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(2, 3, 4, 5), G.WithName("x"))
	for _, f := range []layers.Format{layers.NCHW, layers.NHWC} {
		y, err := layers.Reformat(x, f, f)
		if err != nil || y != x {
			t.Errorf("Reformat(x, %v, %v) = %v, %v; want x itself", f, f, y, err)
		}
	}
}

func TestReformatErrors(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(2, 3, 4, 5), G.WithName("x"))
	m := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("m"))
	for _, tc := range []struct {
		name     string
		x        *G.Node
		from, to layers.Format
		want     []string
	}{
		{"nil", nil, layers.NCHW, layers.NHWC, []string{"nil input"}},
		{"matrix", m, layers.NCHW, layers.NHWC, []string{"m", "(2, 3)", "(N, C, H, W)"}},
		{"unknown from", x, layers.Format(9), layers.NHWC, []string{"Format(9)"}},
		{"unknown to", x, layers.NCHW, layers.Format(-1), []string{"Format(-1)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := layers.Reformat(tc.x, tc.from, tc.to)
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}
