package layers

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/dnnl"
	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/towers"
)

// countHelps is a towers.Helper that counts the pieces of work h ran.
type countHelps struct {
	h towers.Helper
	n *atomic.Int64
}

func (c countHelps) Help() bool {
	ok := c.h.Help()
	if ok {
		c.n.Add(1)
	}
	return ok
}

// TestSharingKeepsTheBits: two towers of convolutions and synchronized
// batch normalizations, in float32 and (where the CPU has it) bfloat16,
// compute the same bits with their convolutions shared with the waiting
// tower (towers.Sharing, given by the engine as it compiles them; a
// chunk of one image, so there is something to take) as with sharing
// turned off: the outputs and the kernels' gradients, which go through
// the input gradient passes (ShareConvolutions(false)). Whether a tower
// helps in a given run is up to timing (the test logs how often it did);
// the bits may not depend on it.
func TestSharingKeepsTheBits(t *testing.T) {
	defer func(n int) { dnnlChunkImages = n }(dnnlChunkImages)
	dnnlChunkImages = 1
	precisions := []towers.Precision{towers.FullPrecision}
	if dnnl.BF16() {
		precisions = append(precisions, towers.BFloat16)
	}
	for _, prec := range precisions {
		t.Run(prec.String(), func(t *testing.T) {
			store := towers.NewStore(towers.StoreConfig{Seed: 3})
			var ts []*tower.Tower
			var watched [][]*G.Node
			var first *towers.Scope
			for i := range 2 {
				s := towers.NewScope(i, 2, towers.CPU(i), store, first)
				if i == 0 {
					first = s
				}
				tw := tower.New(s, nil)
				x, err := tw.Input("x", tensor.Float32, tensor.Shape{6, 8, 8, 16})
				if err != nil {
					t.Fatal(err)
				}
				h := x
				for _, name := range []string{"c1", "c2"} {
					k := s.MustVariable(name+"/kernel", tensor.Float32, tensor.Shape{16, 16, 3, 3}, towers.GlorotUniform())
					c, err := Conv2D(h, k, nil, Conv{Padding: [2]int{1, 1}, Format: NHWC})
					if err != nil {
						t.Fatal(err)
					}
					if h, err = BatchNorm(s, name+"/bn", c, true, BatchNormConfig{Activation: ReLU, Format: NHWC}); err != nil {
						t.Fatal(err)
					}
				}
				loss := G.Must(G.Sum(G.Must(G.Square(h))))
				grads, err := tw.Gradients(loss, []string{"c1/kernel", "c2/kernel"})
				if err != nil {
					t.Fatal(err)
				}
				w := []*G.Node{h, grads["c1/kernel"], grads["c2/kernel"]}
				for _, n := range w {
					if err := tw.Watch(n); err != nil {
						t.Fatal(err)
					}
				}
				for _, n := range tw.Graph().AllNodes() {
					if op, ok := n.Op().(towers.MixedPrecision); ok {
						op.SetPrecision(prec)
					}
				}
				if err := tw.Compile(); err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(7, uint64(i)))
				xs := make([]float32, 6*8*8*16)
				for j := range xs {
					xs[j] = float32(r.NormFloat64())
				}
				if err := tw.Feed("x", tensor.New(tensor.WithShape(6, 8, 8, 16), tensor.WithBacking(xs))); err != nil {
					t.Fatal(err)
				}
				ts = append(ts, tw)
				watched = append(watched, w)
			}
			run := func() [][][]float32 {
				t.Helper()
				if err := tower.RunAll(context.Background(), ts, func(tw *tower.Tower) error { return tw.Run() }); err != nil {
					t.Fatal(err)
				}
				var got [][][]float32
				for i, tw := range ts {
					var vs [][]float32
					for _, n := range watched[i] {
						v, err := tw.Value(n)
						if err != nil {
							t.Fatal(err)
						}
						vs = append(vs, append([]float32(nil), v.Data().([]float32)...))
					}
					got = append(got, vs)
				}
				return got
			}
			sharing := 0
			var helped atomic.Int64
			for _, tw := range ts {
				for _, n := range tw.Graph().AllNodes() {
					var o *convSharing
					switch op := n.Op().(type) {
					case *convOp:
						o = &op.convSharing
					case *convGradOp:
						o = &op.convSharing
					default:
						continue
					}
					if o.board != nil {
						sharing++
						o.post.Helper = countHelps{o.post.Helper, &helped}
					}
				}
			}
			shared := run()
			t.Logf("the towers helped each other with %d chunks", helped.Load())
			if sharing != 6 {
				t.Errorf("%d ops share their runs, want 6 (each tower's two forward passes and the second convolution's input gradient)", sharing)
			}
			ShareConvolutions(false)
			defer ShareConvolutions(true)
			if diff := cmp.Diff(run(), shared); diff != "" {
				t.Errorf("outputs and gradients per tower (-unshared +shared):\n%s", diff)
			}
		})
	}
}
