package tower_test

import (
	"errors"
	"fmt"
	"hash"
	"testing"

	"github.com/chewxy/hm"
	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/towers"
)

// probeOp is x ⊙ w for vectors. Its gradient with respect to x (the
// input) is a refuseOp, which fails when it runs: a tower must not compute
// a gradient nothing reads.
type probeOp struct{}

func (probeOp) Arity() int { return 2 }
func (probeOp) Type() hm.Type {
	t := G.TensorType{Dims: 1, Of: hm.TypeVariable('a')}
	return hm.NewFnType(t, t, t)
}
func (probeOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (probeOp) Do(in ...G.Value) (G.Value, error) {
	x, w := in[0].Data().([]float64), in[1].Data().([]float64)
	out := make([]float64, len(x))
	for i := range out {
		out[i] = x[i] * w[i]
	}
	return tensor.New(tensor.WithShape(len(out)), tensor.WithBacking(out)), nil
}
func (probeOp) ReturnsPtr() bool      { return false }
func (probeOp) CallsExtern() bool     { return false }
func (probeOp) OverwritesInput() int  { return -1 }
func (probeOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "probe") }
func (probeOp) Hashcode() uint32      { return 1 }
func (probeOp) String() string        { return "probe" }
func (probeOp) DiffWRT(n int) []bool  { return []bool{true, true} }
func (probeOp) SymDiff(in G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(refuseOp{}, grad)
	if err != nil {
		return nil, err
	}
	dw, err := G.HadamardProd(grad, in[0])
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dw}, nil
}

var errComputed = errors.New("the gradient with respect to the input was computed")

type refuseOp struct{}

func (refuseOp) Arity() int { return 1 }
func (refuseOp) Type() hm.Type {
	t := G.TensorType{Dims: 1, Of: hm.TypeVariable('a')}
	return hm.NewFnType(t, t)
}
func (refuseOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (refuseOp) Do(...G.Value) (G.Value, error) { return nil, errComputed }
func (refuseOp) ReturnsPtr() bool               { return false }
func (refuseOp) CallsExtern() bool              { return false }
func (refuseOp) OverwritesInput() int           { return -1 }
func (refuseOp) WriteHash(h hash.Hash)          { fmt.Fprint(h, "refuse") }
func (refuseOp) Hashcode() uint32               { return 2 }
func (refuseOp) String() string                 { return "refuse" }

// TestCompileLeavesOutUnreadGradients: the gradient with respect to the
// input, made by Gradients as a by-product and read by nobody, is not run;
// the one with respect to the variable is. Nodes the model function made
// itself are all kept, even unread: the same op, differentiated by the
// model's own G.Grad, runs (and fails, as it must here).
func TestCompileLeavesOutUnreadGradients(t *testing.T) {
	for _, c := range []struct {
		name      string
		modelGrad bool
		wantErr   error
	}{
		{name: "by Gradients", wantErr: nil},
		{name: "by the model", modelGrad: true, wantErr: errComputed},
	} {
		t.Run(c.name, func(t *testing.T) {
			tw := tower.New(towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil), nil)
			w := tw.MustVariable("w", tensor.Float64, tensor.Shape{3}, towers.Constant(2))
			x, err := tw.Input("x", tensor.Float64, tensor.Shape{3})
			if err != nil {
				t.Fatal(err)
			}
			y, err := G.ApplyOp(probeOp{}, x, w)
			if err != nil {
				t.Fatal(err)
			}
			loss := G.Must(G.Sum(y))
			var dw *G.Node
			if c.modelGrad {
				gs, err := G.Grad(loss, w)
				if err != nil {
					t.Fatal(err)
				}
				dw = gs[0]
			} else {
				gs, err := tw.Gradients(loss, []string{"w"})
				if err != nil {
					t.Fatal(err)
				}
				dw = gs["w"]
			}
			if err := tw.Watch(dw); err != nil {
				t.Fatal(err)
			}
			if err := tw.Compile(); err != nil {
				t.Fatal(err)
			}
			if err := tw.Feed("x", tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 2, 3}))); err != nil {
				t.Fatal(err)
			}
			err = tw.Run()
			if !errors.Is(err, c.wantErr) && (c.wantErr == nil || err == nil) {
				t.Fatalf("Run() = %v, want %v", err, c.wantErr)
			}
			if c.wantErr != nil {
				return
			}
			v, err := tw.Value(dw)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]float64{1, 2, 3}, v.Data()); diff != "" {
				t.Errorf("gradient wrt w (-want +got):\n%s", diff)
			}
		})
	}
}
