package layers_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/scopes"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/towers"
)

// bnNet is Σ w ⊙ BatchNorm(x) on one tower, with gradients with respect
// to x, gamma and beta, and the new moving statistics in training.
type bnNet struct {
	x, w        *G.Node
	out, loss   G.Value
	gx, gg, gb  G.Value
	vm          G.VM
	store       *towers.Store
	updateNames []string
	updates     []G.Value
}

func newBNNet(t *testing.T, dt tensor.Dtype, shape tensor.Shape, training bool, act layers.Activation) *bnNet {
	t.Helper()
	return newBNNetFormat(t, dt, shape, training, act, layers.NCHW)
}

// newBNNetFormat is newBNNet on x in order f, whose γ, β and moving
// statistics cycle through the values refBatchNorm takes for 3 channels.
func newBNNetFormat(t *testing.T, dt tensor.Dtype, shape tensor.Shape, training bool, act layers.Activation, f layers.Format) *bnNet {
	t.Helper()
	store := towers.NewStore(towers.StoreConfig{Seed: 3})
	s := towers.NewScope(0, 1, towers.CPU(0), store, nil)
	n := &bnNet{store: store}
	n.x = G.NewTensor(s.Graph(), dt, len(shape), G.WithShape(shape...), G.WithName("x"))
	n.w = G.NewTensor(s.Graph(), dt, len(shape), G.WithShape(shape...), G.WithName("w"))
	y, err := layers.BatchNorm(s, "bn", n.x, training, layers.BatchNormConfig{Momentum: 0.8, Epsilon: 0.01, Activation: act, Format: f})
	if err != nil {
		t.Fatal(err)
	}
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(y, n.w))))
	gamma, _ := s.VariableNode("bn/gamma")
	beta, _ := s.VariableNode("bn/beta")
	setBNParams(t, store)
	grads, err := G.Grad(loss, n.x, gamma, beta)
	if err != nil {
		t.Fatal(err)
	}
	G.Read(y, &n.out)
	G.Read(loss, &n.loss)
	G.Read(grads[0], &n.gx)
	G.Read(grads[1], &n.gg)
	G.Read(grads[2], &n.gb)
	ups := scopes.Updates(s)
	n.updates = make([]G.Value, len(ups))
	for i, u := range ups {
		n.updateNames = append(n.updateNames, u.Var)
		G.Read(u.Value, &n.updates[i])
	}
	n.vm = G.NewTapeMachine(s.Graph())
	t.Cleanup(func() { n.vm.Close() })
	return n
}

// setBNParams gives the normalization bn in store non-trivial γ and β and
// moving statistics: the values refBatchNorm takes for 3 channels, cycled.
func setBNParams(t *testing.T, store *towers.Store) {
	t.Helper()
	for name, vals := range map[string][]float64{"bn/gamma": {1.5, -0.5, 2}, "bn/beta": {0.1, 0.3, -0.2}, "bn/moving_mean": {0.2, -0.1, 0.4}, "bn/moving_variance": {1.5, 0.7, 2}} {
		v, err := store.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cycled := make([]float64, v.Size())
		for i := range cycled {
			cycled[i] = vals[i%len(vals)]
		}
		if err := numeric.SetFloat64s(v.Data(), cycled); err != nil {
			t.Fatal(err)
		}
	}
}

// float64sOf returns the elements of each value as float64s.
func float64sOf(t *testing.T, vals []G.Value) [][]float64 {
	t.Helper()
	var out [][]float64
	for _, v := range vals {
		f, err := numeric.Float64s(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func (n *bnNet) run(t *testing.T, dt tensor.Dtype, shape tensor.Shape, x, w []float64) (float64, [][]float64) {
	t.Helper()
	n.vm.Reset()
	if err := G.Let(n.x, tensorOf(dt, shape, x)); err != nil {
		t.Fatal(err)
	}
	if err := G.Let(n.w, tensorOf(dt, shape, w)); err != nil {
		t.Fatal(err)
	}
	if err := n.vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	out := float64sOf(t, []G.Value{n.loss, n.out, n.gx, n.gg, n.gb})
	return out[0][0], out[1:]
}

// refBatchNorm is the normalization written directly, per channel.
func refBatchNorm(x []float64, shape tensor.Shape, training bool, act layers.Activation) []float64 {
	n, c, hw := shape[0], shape[1], 1
	if len(shape) == 4 {
		hw = shape[2] * shape[3]
	}
	gamma, beta := []float64{1.5, -0.5, 2}, []float64{0.1, 0.3, -0.2}
	mean, variance := []float64{0.2, -0.1, 0.4}, []float64{1.5, 0.7, 2}
	out := make([]float64, len(x))
	for ch := range c {
		m, v := mean[ch], variance[ch]
		if training {
			m, v = 0, 0
			for i := range n {
				for j := range hw {
					m += x[(i*c+ch)*hw+j]
				}
			}
			m /= float64(n * hw)
			for i := range n {
				for j := range hw {
					d := x[(i*c+ch)*hw+j] - m
					v += d * d
				}
			}
			v /= float64(n * hw)
		}
		for i := range n {
			for j := range hw {
				k := (i*c+ch)*hw + j
				out[k] = gamma[ch]*(x[k]-m)/math.Sqrt(v+0.01) + beta[ch]
				if act == layers.ReLU {
					out[k] = math.Max(out[k], 0)
				}
			}
		}
	}
	return out
}

// TestBatchNorm: BatchNorm's output against the formula, and its
// gradients with respect to x, γ and β against central finite
// differences, in training and inference, per feature (N, C) and per
// channel (N, C, H, W), with and without the fused ReLU, float64 and
// float32 (values only).
func TestBatchNorm(t *testing.T) {
	for _, shape := range []tensor.Shape{{5, 3}, {3, 3, 2, 2}} {
		for _, training := range []bool{true, false} {
			for _, act := range []layers.Activation{layers.Linear, layers.ReLU} {
				for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
					t.Run(fmt.Sprintf("%v/training=%t/%v/%v", shape, training, act, dt), func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(len(shape)), 9))
						x, w := make([]float64, shape.TotalSize()), make([]float64, shape.TotalSize())
						for i := range x {
							x[i], w[i] = r.NormFloat64()*3+1, r.NormFloat64()
						}
						net := newBNNet(t, dt, shape, training, act)
						wantUpdates := []string(nil)
						if training {
							wantUpdates = []string{"bn/moving_mean", "bn/moving_variance"}
						}
						if diff := cmp.Diff(wantUpdates, net.updateNames); diff != "" {
							t.Errorf("state updates (-want +got):\n%s", diff)
						}
						_, got := net.run(t, dt, shape, x, w)
						tol := 1e-12
						if dt == tensor.Float32 {
							tol = 1e-5
						}
						if diff := cmp.Diff(refBatchNorm(x, shape, training, act), got[0], cmpopts.EquateApprox(tol, tol)); diff != "" {
							t.Errorf("output (-want +got):\n%s", diff)
						}
						if dt != tensor.Float64 {
							return
						}
						const h = 1e-6
						num := make([]float64, len(x))
						for i := range x {
							p := append([]float64(nil), x...)
							p[i] += h
							lp, _ := net.run(t, dt, shape, p, w)
							p[i] -= 2 * h
							lm, _ := net.run(t, dt, shape, p, w)
							num[i] = (lp - lm) / (2 * h)
						}
						_, got = net.run(t, dt, shape, x, w)
						if diff := cmp.Diff(num, got[1], cmpopts.EquateApprox(1e-5, 1e-6)); diff != "" {
							t.Errorf("gradient wrt x (-finite differences +op):\n%s", diff)
						}
						// dβ = Σ w ⊙ act′, dγ = Σ w ⊙ act′ ⊙ x̂: from the reference with γ = 1, β = 0.
						y := refBatchNorm(x, shape, training, act)
						c, hw := shape[1], shape.TotalSize()/shape[0]/shape[1]
						gamma, beta := []float64{1.5, -0.5, 2}, []float64{0.1, 0.3, -0.2}
						wantG, wantB := make([]float64, c), make([]float64, c)
						for k := range x {
							ch := (k / hw) % c
							if act == layers.ReLU && y[k] <= 0 {
								continue
							}
							lin := y[k]
							if act == layers.ReLU {
								lin = y[k]
							}
							wantB[ch] += w[k]
							wantG[ch] += w[k] * (lin - beta[ch]) / gamma[ch]
						}
						if diff := cmp.Diff([][]float64{wantG, wantB}, got[2:], cmpopts.EquateApprox(1e-9, 1e-9)); diff != "" {
							t.Errorf("gradients wrt γ and β (-want +got):\n%s", diff)
						}
					})
				}
			}
		}
	}
}

// TestBatchNormLargeMean: statistics of float32 activations whose mean is
// large against their spread stay exact once the moving mean is near it
// (the sums are taken from it), where E[x²] − E[x]² in float32 would cancel
// to noise.
func TestBatchNormLargeMean(t *testing.T) {
	shape := tensor.Shape{4, 3, 4, 4}
	net := newBNNet(t, tensor.Float32, shape, true, layers.Linear)
	mv, err := net.store.Lookup("bn/moving_mean")
	if err != nil {
		t.Fatal(err)
	}
	if err := numeric.SetFloat64s(mv.Data(), []float64{1e4, 1e4, 1e4}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	x, w := make([]float64, shape.TotalSize()), make([]float64, shape.TotalSize())
	for i := range x {
		x[i] = float64(float32(1e4 + r.NormFloat64())) // as the op sees it
		w[i] = 1
	}
	_, got := net.run(t, tensor.Float32, shape, x, w)
	if diff := cmp.Diff(refBatchNorm(x, shape, true, layers.Linear), got[0], cmpopts.EquateApprox(0, 2e-3)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestBatchNormNHWC: BatchNorm with Format NHWC on the transposed input
// gives the transposed output, the transposed gradient with respect to x,
// and the gradients with respect to γ and β and the moving statistics of
// NCHW on the input, within float rounding (the sums add in another order),
// in training and inference, with and without the fused ReLU, float64 and
// float32, with channels that fill no vector, some vectors and a part of
// one, and more rows than a block of the sums.
func TestBatchNormNHWC(t *testing.T) {
	for _, shape := range []tensor.Shape{{4, 3, 3, 5}, {2, 5, 3, 3}, {2, 16, 4, 4}, {3, 19, 2, 3}, {5, 16, 8, 8}, {2, 40, 9, 9}} {
		n, c, h, w := shape[0], shape[1], shape[2], shape[3]
		nhwc := tensor.Shape{n, h, w, c}
		for _, training := range []bool{true, false} {
			for _, act := range []layers.Activation{layers.Linear, layers.ReLU} {
				for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
					t.Run(fmt.Sprintf("%v/training=%t/%v/%v", shape, training, act, dt), func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(c), 10))
						x, wt := make([]float64, shape.TotalSize()), make([]float64, shape.TotalSize())
						for i := range x {
							x[i], wt[i] = float64(float32(r.NormFloat64()*3+1)), float64(float32(r.NormFloat64()))
						}
						first := newBNNetFormat(t, dt, shape, training, act, layers.NCHW)
						last := newBNNetFormat(t, dt, nhwc, training, act, layers.NHWC)
						if diff := cmp.Diff(first.updateNames, last.updateNames); diff != "" {
							t.Errorf("state updates (-NCHW +NHWC):\n%s", diff)
						}
						wantLoss, want := first.run(t, dt, shape, x, wt)
						want = append(want, first.updateValues(t)...)
						gotLoss, got := last.run(t, dt, nhwc, toNHWC(x, n, c, h, w), toNHWC(wt, n, c, h, w))
						got = append(got, last.updateValues(t)...)
						got[0], got[1] = fromNHWC(got[0], n, c, h, w), fromNHWC(got[1], n, c, h, w)
						tol := cmpopts.EquateApprox(1e-12, 1e-12)
						if dt == tensor.Float32 {
							// γ's gradient sums hundreds of terms of either
							// sign, of size about 1: a margin for their
							// rounding in another order.
							tol = cmpopts.EquateApprox(1e-5, 1e-4)
						}
						if diff := cmp.Diff(wantLoss, gotLoss, tol); diff != "" {
							t.Errorf("loss (-NCHW +NHWC):\n%s", diff)
						}
						if diff := cmp.Diff(want, got, tol); diff != "" {
							t.Errorf("output, gradients wrt x, γ, β, moving statistics (-NCHW +NHWC):\n%s", diff)
						}
					})
				}
			}
		}
	}
}

// updateValues returns the moving statistics' new values of the last run.
func (n *bnNet) updateValues(t *testing.T) [][]float64 {
	t.Helper()
	return float64sOf(t, n.updates)
}

// TestBatchNormFormatErrors: an unknown format, or an input of another
// shape than the format's, is an error naming the layer, the input and
// what was wanted.
func TestBatchNormFormatErrors(t *testing.T) {
	store := towers.NewStore(towers.StoreConfig{Seed: 3})
	s := towers.NewScope(0, 1, towers.CPU(0), store, nil)
	in := func(name string, shape ...int) *G.Node {
		return G.NewTensor(s.Graph(), tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name))
	}
	layer := func(name string, f layers.Format) (*layers.BatchNormLayer, error) {
		return layers.NewBatchNorm(layers.NewModule(s, ""), name, layers.BatchNormLayerConfig{Channels: 16, BatchNormConfig: layers.BatchNormConfig{Format: f}})
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want []string
	}{
		{"unknown format", func() error {
			_, err := layers.BatchNorm(s, "bn1", in("x1", 2, 16, 4, 4), true, layers.BatchNormConfig{Format: layers.Format(7)})
			return err
		}, []string{"layers.BatchNorm", "bn1", "unknown data format Format(7)"}},
		{"rank", func() error {
			_, err := layers.BatchNorm(s, "bn2", in("x2", 2, 4, 16), true, layers.BatchNormConfig{Format: layers.NHWC})
			return err
		}, []string{"bn2", "x2", "(2, 4, 16)", "want (N, C) or (N, H, W, C)"}},
		{"layer unknown format", func() error {
			_, err := layer("bn3", layers.Format(-1))
			return err
		}, []string{"layers.NewBatchNorm", "bn3", "unknown data format Format(-1)"}},
		{"layer channels", func() error {
			l, err := layer("bn4", layers.NHWC)
			if err != nil {
				return err
			}
			_, err = l.Apply(in("x4", 2, 16, 4, 4), true)
			return err
		}, []string{"bn4", "x4", "(2, 16, 4, 4)", "want (N, 16) or (N, H, W, 16)"}},
		{"layer channels NCHW", func() error {
			l, err := layer("bn5", layers.NCHW)
			if err != nil {
				return err
			}
			_, err = l.Apply(in("x5", 2, 4, 4, 16), true)
			return err
		}, []string{"bn5", "x5", "(2, 4, 4, 16)", "want (N, 16) or (N, 16, H, W)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wanterr.Mentions(t, tc.do(), tc.want...)
		})
	}
}
