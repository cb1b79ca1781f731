package layers_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/towers"
)

// bnAdd is how bnAddNet computes act(BN(x) + side).
type bnAdd int

const (
	composed bnAdd = iota // Add(BatchNorm(x) with no activation, side, act)
	fused                 // BatchNormAdd
	layerAdd              // BatchNormLayer.ApplyAdd
)

// bnAddNet is Σ w ⊙ act(BN(x) + side) on one tower: its values, in order,
// are the output, the gradients with respect to x, side, γ and β, and in
// training the moving statistics' new values.
type bnAddNet struct {
	x, side, w *G.Node
	vals       []G.Value
	vm         G.VM
}

func newBNAddNet(t *testing.T, dt tensor.Dtype, shape tensor.Shape, training bool, act layers.Activation, f layers.Format, how bnAdd) *bnAddNet {
	t.Helper()
	store := towers.NewStore(towers.StoreConfig{Seed: 3})
	s := towers.NewScope(0, 1, towers.CPU(0), store, nil)
	n := &bnAddNet{}
	in := func(name string) *G.Node {
		return G.NewTensor(s.Graph(), dt, len(shape), G.WithShape(shape...), G.WithName(name))
	}
	n.x, n.side, n.w = in("x"), in("side"), in("w")
	cfg := layers.BatchNormConfig{Momentum: 0.8, Epsilon: 0.01, Activation: act, Format: f}
	var y *G.Node
	var err error
	switch how {
	case composed:
		cfg.Activation = layers.Linear
		if y, err = layers.BatchNorm(s, "bn", n.x, training, cfg); err == nil {
			y, err = layers.Add(y, n.side, act)
		}
	case fused:
		y, err = layers.BatchNormAdd(s, "bn", n.x, n.side, training, cfg)
	case layerAdd:
		c := shape[1]
		if f == layers.NHWC && len(shape) == 4 {
			c = shape[3]
		}
		var l *layers.BatchNormLayer
		if l, err = layers.NewBatchNorm(layers.NewModule(s, ""), "bn", layers.BatchNormLayerConfig{Channels: c, Dtype: dt, BatchNormConfig: cfg}); err == nil {
			y, err = l.ApplyAdd(n.x, n.side, training)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, n.w))))
	gamma, _ := s.VariableNode("bn/gamma")
	beta, _ := s.VariableNode("bn/beta")
	setBNParams(t, store)
	grads, err := G.Grad(loss, n.x, n.side, gamma, beta)
	if err != nil {
		t.Fatal(err)
	}
	read := append(G.Nodes{y}, grads...)
	for _, u := range scopes.Updates(s) {
		read = append(read, u.Value)
	}
	n.vals = make([]G.Value, len(read))
	for i, r := range read {
		G.Read(r, &n.vals[i])
	}
	n.vm = G.NewTapeMachine(s.Graph())
	t.Cleanup(func() { n.vm.Close() })
	return n
}

func (n *bnAddNet) run(t *testing.T, dt tensor.Dtype, shape tensor.Shape, x, side, w []float64) [][]float64 {
	t.Helper()
	n.vm.Reset()
	for _, in := range []struct {
		n *G.Node
		v []float64
	}{{n.x, x}, {n.side, side}, {n.w, w}} {
		if err := G.Let(in.n, tensorOf(dt, shape, in.v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return float64sOf(t, n.vals)
}

// TestBatchNormAdd: BatchNormAdd and BatchNormLayer.ApplyAdd compute what
// BatchNorm followed by Add computes, bit for bit: the output, the
// gradients with respect to x, the side input, γ and β, and the moving
// statistics, in and out of training, per feature, per channel in either
// order (with whole vectors of channels, a tail, and several blocks of
// rows), with and without the ReLU, float32 and float64, over two runs
// (the second reuses the first's buffers).
func TestBatchNormAdd(t *testing.T) {
	for _, tc := range []struct {
		shape tensor.Shape
		f     layers.Format
	}{
		{tensor.Shape{5, 3}, layers.NCHW},
		{tensor.Shape{3, 3, 4, 4}, layers.NCHW},
		{tensor.Shape{3, 2, 2, 3}, layers.NHWC},
		{tensor.Shape{4, 8, 8, 16}, layers.NHWC},
		{tensor.Shape{2, 4, 4, 19}, layers.NHWC},
	} {
		for _, training := range []bool{true, false} {
			for _, act := range []layers.Activation{layers.Linear, layers.ReLU} {
				for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
					t.Run(fmt.Sprintf("%v/%v/training=%t/%v/%v", tc.shape, tc.f, training, act, dt), func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(len(tc.shape)), 11))
						size := tc.shape.TotalSize()
						want := newBNAddNet(t, dt, tc.shape, training, act, tc.f, composed)
						nets := map[string]*bnAddNet{
							"BatchNormAdd": newBNAddNet(t, dt, tc.shape, training, act, tc.f, fused),
							"ApplyAdd":     newBNAddNet(t, dt, tc.shape, training, act, tc.f, layerAdd),
						}
						for run := range 2 {
							x, side, w := make([]float64, size), make([]float64, size), make([]float64, size)
							for i := range x {
								x[i], side[i], w[i] = r.NormFloat64()*3+1, r.NormFloat64(), r.NormFloat64()
							}
							wantVals := want.run(t, dt, tc.shape, x, side, w)
							if got := len(wantVals); got != 5+2*btoi(training) {
								t.Fatalf("%d values, want %d", got, 5+2*btoi(training))
							}
							for name, net := range nets {
								if diff := cmp.Diff(wantVals, net.run(t, dt, tc.shape, x, side, w)); diff != "" {
									t.Errorf("run %d: %s: output, gradients (x, side, γ, β) and updates (-BatchNorm then Add +%s):\n%s", run, name, name, diff)
								}
							}
						}
					})
				}
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestBatchNormAddErrors: a side input missing, of another shape or dtype
// than x, or of another graph, is an error naming the layer and both.
func TestBatchNormAddErrors(t *testing.T) {
	store := towers.NewStore(towers.StoreConfig{Seed: 3})
	s := towers.NewScope(0, 1, towers.CPU(0), store, nil)
	other := towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil)
	in := func(s *towers.Scope, name string, dt tensor.Dtype, shape ...int) *G.Node {
		return G.NewTensor(s.Graph(), dt, len(shape), G.WithShape(shape...), G.WithName(name))
	}
	x := in(s, "x", tensor.Float32, 2, 4, 4, 8)
	for _, tc := range []struct {
		name string
		do   func() error
		want []string
	}{
		{"nil side", func() error {
			_, err := layers.BatchNormAdd(s, "bn1", x, nil, true, layers.BatchNormConfig{})
			return err
		}, []string{"layers.BatchNormAdd", "bn1", "nil side input"}},
		{"shape", func() error {
			_, err := layers.BatchNormAdd(s, "bn2", x, in(s, "s2", tensor.Float32, 2, 8, 4, 4), true, layers.BatchNormConfig{Format: layers.NHWC})
			return err
		}, []string{"layers.BatchNormAdd", "bn2", "s2", "(2, 8, 4, 4)", "x", "(2, 4, 4, 8)"}},
		{"dtype", func() error {
			_, err := layers.BatchNormAdd(s, "bn3", x, in(s, "s3", tensor.Float64, 2, 4, 4, 8), false, layers.BatchNormConfig{Format: layers.NHWC})
			return err
		}, []string{"bn3", "s3", "float64", "want float32"}},
		{"graph", func() error {
			_, err := layers.BatchNormAdd(s, "bn4", x, in(other, "s4", tensor.Float32, 2, 4, 4, 8), true, layers.BatchNormConfig{Format: layers.NHWC})
			return err
		}, []string{"bn4", "s4", "another graph"}},
		{"layer nil side", func() error {
			l, err := layers.NewBatchNorm(layers.NewModule(s, ""), "bn5", layers.BatchNormLayerConfig{Channels: 8, BatchNormConfig: layers.BatchNormConfig{Format: layers.NHWC}})
			if err != nil {
				return err
			}
			_, err = l.ApplyAdd(x, nil, true)
			return err
		}, []string{"ApplyAdd", "bn5", "nil side input"}},
		{"layer shape", func() error {
			l, err := layers.NewBatchNorm(layers.NewModule(s, ""), "bn6", layers.BatchNormLayerConfig{Channels: 8, BatchNormConfig: layers.BatchNormConfig{Format: layers.NHWC}})
			if err != nil {
				return err
			}
			_, err = l.ApplyAdd(x, in(s, "s6", tensor.Float32, 2, 4, 8), true)
			return err
		}, []string{"ApplyAdd", "bn6", "s6", "(2, 4, 8)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wanterr.Mentions(t, tc.do(), tc.want...)
		})
	}
	// A refused side input leaves nothing behind: BatchNormAdd creates no
	// variables, and a layer refused in training may still be applied.
	if _, err := store.Lookup("bn2/gamma"); err == nil {
		t.Errorf("BatchNormAdd refused a side input but created bn2/gamma")
	}
	l, err := layers.NewBatchNorm(layers.NewModule(s, ""), "bn7", layers.BatchNormLayerConfig{Channels: 8, BatchNormConfig: layers.BatchNormConfig{Format: layers.NHWC}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyAdd(x, in(s, "s7", tensor.Float32, 2, 4, 8), true); err == nil {
		t.Fatal("ApplyAdd took a side input of another shape")
	}
	if _, err := l.ApplyAdd(x, in(s, "s8", tensor.Float32, 2, 4, 4, 8), true); err != nil {
		t.Errorf("ApplyAdd in training after a refused side input: %v", err)
	}
}
