package layers_test

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"testing"

	"github.com/towerflow/towerflow/internal/vartest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/reference"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// scope returns tower 0's scope of a one-tower build over a new store.
func scope() (*towers.Scope, *towers.Store) {
	store := towers.NewStore(towers.StoreConfig{Seed: 7})
	return towers.NewScope(0, 1, towers.CPU(0), store, nil), store
}

// constant adds a node of g holding v, named name.
func constant(g *G.ExprGraph, name string, v *tensor.Dense) *G.Node {
	return towers.NewNode(g, v.Dtype(), v.Shape(), name, G.WithValue(v))
}

// gradients runs g once and returns loss's gradients with respect to wrt
// as float64s, read as they are computed.
func gradients(t *testing.T, g *G.ExprGraph, loss *G.Node, wrt ...*G.Node) [][]float64 {
	t.Helper()
	grads, err := G.Grad(loss, wrt...)
	if err != nil {
		t.Fatalf("grad: %v", err)
	}
	reads := make([]*G.Value, len(grads))
	for i, gr := range grads {
		reads[i] = new(G.Value)
		G.Read(gr, reads[i])
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatalf("run: %v", err)
	}
	out := make([][]float64, len(reads))
	for i, r := range reads {
		if out[i], err = numeric.Float64s(*r); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	return out
}

// sharedCase is a layer applied to two inputs, and the same layer written
// with gorgonia's ops over the given kernel and bias nodes.
type sharedCase struct {
	name   string
	x      tensor.Shape // each input's
	y      tensor.Shape // each output's
	layer  func(m *layers.Module, dt tensor.Dtype) (apply func(*G.Node) (*G.Node, error), vars []*G.Node, err error)
	plain  func(x, k, b *G.Node) (*G.Node, error)
	wantVs []string
}

var sharedCases = []sharedCase{
	{
		name: "dense", x: tensor.Shape{5, 3}, y: tensor.Shape{5, 4},
		layer: func(m *layers.Module, dt tensor.Dtype) (func(*G.Node) (*G.Node, error), []*G.Node, error) {
			l, err := layers.NewDense(m, "dense_1", layers.DenseConfig{In: 3, Units: 4, Activation: layers.ReLU, Dtype: dt, BiasInit: towers.RandomUniform(-0.5, 0.5)})
			if err != nil {
				return nil, nil, err
			}
			return l.Apply, []*G.Node{l.Kernel(), l.Bias()}, nil
		},
		plain:  func(x, k, b *G.Node) (*G.Node, error) { return reference.Dense(x, k, b, true) },
		wantVs: []string{"encoder/dense_1/kernel", "encoder/dense_1/bias"},
	},
	{
		name: "conv2d", x: tensor.Shape{2, 2, 5, 5}, y: tensor.Shape{2, 3, 3, 3},
		layer: func(m *layers.Module, dt tensor.Dtype) (func(*G.Node) (*G.Node, error), []*G.Node, error) {
			l, err := layers.NewConv2D(m, "conv_1", layers.Conv2DConfig{In: 2, Filters: 3, Size: [2]int{3, 3},
				Conv: layers.Conv{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, Activation: layers.ReLU}, Dtype: dt, BiasInit: towers.RandomUniform(-0.5, 0.5)})
			if err != nil {
				return nil, nil, err
			}
			return l.Apply, []*G.Node{l.Kernel(), l.Bias()}, nil
		},
		plain: func(x, k, b *G.Node) (*G.Node, error) {
			return reference.Conv2D(x, k, b, [2]int{2, 2}, [2]int{1, 1}, true)
		},
		wantVs: []string{"encoder/conv_1/kernel", "encoder/conv_1/bias"},
	},
}

// TestLayerAppliedTwice: a layer applied to two inputs owns one set of
// variables, and its gradient is what gorgonia's differentiation gives for
// the same graph written with its own ops, one kernel and bias used twice;
// that is the sum of the gradients of the two uses, each differentiated
// with a kernel and bias of its own.
func TestLayerAppliedTwice(t *testing.T) {
	for _, tc := range sharedCases {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, 2))
				in := randomValues(r, dt, []tensor.Shape{tc.x, tc.x, tc.y, tc.y}) // x1, x2, t1, t2

				s, store := scope()
				apply, vars, err := tc.layer(layers.NewModule(s, "encoder"), dt)
				if err != nil {
					t.Fatal(err)
				}
				var losses [2]*G.Node
				for i := range losses {
					y, err := apply(constant(s.Graph(), fmt.Sprintf("x%d", i), in[i]))
					if err != nil {
						t.Fatal(err)
					}
					if losses[i], err = layers.MeanSquaredError(y, constant(s.Graph(), fmt.Sprintf("t%d", i), in[2+i])); err != nil {
						t.Fatal(err)
					}
				}
				if diff := cmp.Diff(tc.wantVs, store.Names()); diff != "" {
					t.Errorf("store's variables (-want +got):\n%s", diff)
				}
				got := gradients(t, s.Graph(), G.Must(G.Add(losses[0], losses[1])), vars...)

				// plain builds the layer with gorgonia's ops on a graph of
				// its own, over copies of the masters: uses[i] names the
				// kernel and bias pair input i is multiplied with.
				plain := func(uses [2]int) [][]float64 {
					g := G.NewGraph()
					var params [2][2]*G.Node
					for p := range params {
						for j, name := range tc.wantVs {
							v, err := store.Value(name)
							if err != nil {
								t.Fatal(err)
							}
							params[p][j] = constant(g, fmt.Sprintf("%s#%d", name, p), v)
						}
					}
					var loss *G.Node
					for i, u := range uses {
						y, err := tc.plain(constant(g, fmt.Sprintf("x%d", i), in[i]), params[u][0], params[u][1])
						if err != nil {
							t.Fatal(err)
						}
						l, err := reference.MeanSquaredError(y, constant(g, fmt.Sprintf("t%d", i), in[2+i]))
						if err != nil {
							t.Fatal(err)
						}
						if loss == nil {
							loss = l
						} else {
							loss = G.Must(G.Add(loss, l))
						}
					}
					if uses[0] == uses[1] {
						return gradients(t, g, loss, params[0][:]...)
					}
					return gradients(t, g, loss, append(params[0][:], params[1][:]...)...)
				}
				sameVars := plain([2]int{0, 0})
				perUse := plain([2]int{0, 1})
				sum := make([][]float64, len(vars))
				for j := range sum {
					sum[j] = make([]float64, len(perUse[j]))
					for k := range sum[j] {
						sum[j][k] = perUse[j][k] + perUse[len(vars)+j][k]
					}
				}
				tol := cmpopts.EquateApprox(1e-10, 1e-12)
				if dt == tensor.Float32 {
					tol = cmpopts.EquateApprox(1e-5, 1e-6)
				}
				if diff := cmp.Diff(sameVars, got, tol); diff != "" {
					t.Errorf("gradients differ from gorgonia's of the same graph (-gorgonia +layer):\n%s", diff)
				}
				if diff := cmp.Diff(sum, got, tol); diff != "" {
					t.Errorf("gradients differ from the sum of the two uses' (-sum +layer):\n%s", diff)
				}
			})
		}
	}
}

// TestLayerNames: layers in modules own their variables by path; a layer
// made again with the same name and shapes shares them, and with another
// shape or dtype is an error naming both.
func TestLayerNames(t *testing.T) {
	dense := func(m *layers.Module, name string, in, units int, dt tensor.Dtype) error {
		_, err := layers.NewDense(m, name, layers.DenseConfig{In: in, Units: units, Dtype: dt})
		return err
	}
	for _, tc := range []struct {
		name  string
		build func(s *towers.Scope) error
		want  []string // the error mentions each, or with none no error
	}{
		{"another shape", func(s *towers.Scope) error {
			m := layers.NewModule(s, "encoder")
			if err := dense(m, "dense_1", 3, 4, tensor.Float32); err != nil {
				return err
			}
			return dense(m, "dense_1", 3, 5, tensor.Float32)
		}, []string{`"encoder/dense_1"`, `"encoder/dense_1/kernel"`, "(3, 4)", "(3, 5)"}},
		{"another dtype", func(s *towers.Scope) error {
			m := layers.NewModule(s, "encoder")
			if err := dense(m, "dense_1", 3, 4, tensor.Float32); err != nil {
				return err
			}
			return dense(m, "dense_1", 3, 4, tensor.Float64)
		}, []string{`"encoder/dense_1/kernel"`, "float32", "float64"}},
		{"another kind", func(s *towers.Scope) error {
			m := layers.NewModule(s, "")
			if err := dense(m, "l", 3, 4, tensor.Float32); err != nil {
				return err
			}
			_, err := layers.NewConv2D(m, "l", layers.Conv2DConfig{In: 3, Filters: 4, Size: [2]int{1, 1}})
			return err
		}, []string{`"l/kernel"`, "(3, 4)", "(4, 3, 1, 1)"}},
		{"same name and shape share", func(s *towers.Scope) error {
			m := layers.NewModule(s, "encoder")
			a, err := layers.NewDense(m, "dense_1", layers.DenseConfig{In: 3, Units: 4})
			if err != nil {
				return err
			}
			b, err := layers.NewDense(layers.NewModule(s, "").Sub("encoder"), "dense_1", layers.DenseConfig{In: 3, Units: 4})
			if err != nil {
				return err
			}
			if a.Kernel() != b.Kernel() || a.Bias() != b.Bias() {
				return fmt.Errorf("two layers of one name have different nodes")
			}
			return nil
		}, nil},
		{"unknown activation, dense", func(s *towers.Scope) error {
			_, err := layers.NewDense(layers.NewModule(s, "enc"), "d", layers.DenseConfig{In: 3, Units: 4, Activation: layers.Activation(9)})
			return err
		}, []string{`"enc/d"`, "unknown activation"}},
		{"unknown activation, conv", func(s *towers.Scope) error {
			_, err := layers.NewConv2D(layers.NewModule(s, "enc"), "c", layers.Conv2DConfig{In: 3, Filters: 4, Size: [2]int{3, 3}, Conv: layers.Conv{Activation: layers.Activation(9)}})
			return err
		}, []string{`"enc/c"`, "unknown activation"}},
		{"unknown format, conv", func(s *towers.Scope) error {
			_, err := layers.NewConv2D(layers.NewModule(s, "enc"), "c", layers.Conv2DConfig{In: 3, Filters: 4, Size: [2]int{3, 3}, Conv: layers.Conv{Format: layers.Format(5)}})
			return err
		}, []string{`"enc/c"`, "Format(5)"}},
		{"NCHW batch into an NHWC conv", func(s *towers.Scope) error {
			l, err := layers.NewConv2D(layers.NewModule(s, "enc"), "c", layers.Conv2DConfig{In: 3, Filters: 4, Size: [2]int{3, 3}, Conv: layers.Conv{Format: layers.NHWC}})
			if err != nil {
				return err
			}
			_, err = l.Apply(towers.NewNode(s.Graph(), tensor.Float32, tensor.Shape{2, 3, 8, 8}, "x"))
			return err
		}, []string{`"enc/c"`, "(2, 3, 8, 8)", "(N, H, W, C)", "8 input channels ≠ 3"}},
		{"biases of units and filters, none with NoBias", func(s *towers.Scope) error {
			m := layers.NewModule(s, "")
			d, err := layers.NewDense(m, "d", layers.DenseConfig{In: 3, Units: 5})
			if err != nil {
				return err
			}
			c, err := layers.NewConv2D(m, "c", layers.Conv2DConfig{In: 3, Filters: 4, Size: [2]int{3, 2}})
			if err != nil {
				return err
			}
			n, err := layers.NewConv2D(m, "n", layers.Conv2DConfig{In: 3, Filters: 4, Size: [2]int{1, 1}, NoBias: true})
			if err != nil {
				return err
			}
			if got := [][]int{d.Bias().Shape(), c.Bias().Shape(), c.Kernel().Shape()}; !cmp.Equal(got, [][]int{{5}, {4}, {4, 3, 3, 2}}) {
				return fmt.Errorf("dense bias, conv bias and conv kernel shapes %v, want [5] [4] [4 3 3 2]", got)
			}
			if n.Bias() != nil {
				return fmt.Errorf("NoBias conv has bias %v", n.Bias())
			}
			return nil
		}, nil},
		{"empty name", func(s *towers.Scope) error { return dense(layers.NewModule(s, "encoder"), "", 3, 4, tensor.Float32) },
			[]string{`"encoder//kernel"`, "empty path element"}},
		{"batch norm in training twice", func(s *towers.Scope) error {
			bn, err := layers.NewBatchNorm(layers.NewModule(s, "enc"), "bn", layers.BatchNormLayerConfig{Channels: 2, Dtype: tensor.Float64})
			if err != nil {
				return err
			}
			x := towers.NewNode(s.Graph(), tensor.Float64, tensor.Shape{4, 2}, "x")
			if _, err := bn.Apply(x, false); err != nil {
				return err
			}
			if _, err := bn.Apply(x, true); err != nil {
				return err
			}
			if _, err := bn.Apply(x, false); err != nil {
				return err
			}
			_, err = bn.Apply(x, true)
			return err
		}, []string{`"enc/bn"`, "in training a second time"}},
		{"input of another graph", func(s *towers.Scope) error {
			l, err := layers.NewDense(layers.NewModule(s, ""), "d", layers.DenseConfig{In: 3, Units: 4})
			if err != nil {
				return err
			}
			_, err = l.Apply(towers.NewNode(G.NewGraph(), tensor.Float32, tensor.Shape{2, 3}, "x"))
			return err
		}, []string{`"d"`, "not a node of the layer's graph"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := scope()
			err := tc.build(s)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

// TestLayerNamesAcrossBuilds: a store that holds a layer's variable from
// an earlier build refuses it with another shape, naming both.
func TestLayerNamesAcrossBuilds(t *testing.T) {
	s, store := scope()
	if _, err := layers.NewDense(layers.NewModule(s, "encoder"), "dense_1", layers.DenseConfig{In: 3, Units: 4}); err != nil {
		t.Fatal(err)
	}
	again := towers.NewScope(0, 1, towers.CPU(0), store, nil)
	_, err := layers.NewDense(layers.NewModule(again, "encoder"), "dense_1", layers.DenseConfig{In: 3, Units: 5})
	wanterr.Mentions(t, err, `"encoder/dense_1/kernel"`, "(3, 4)", "(3, 5)")
}

// TestModuleVariablesByPath: a module names its layers' variables under
// its path and lists those under it, submodules' included, as the store
// and its weights by name know them.
func TestModuleVariablesByPath(t *testing.T) {
	s, store := scope()
	root := layers.NewModule(s, "")
	enc := root.Sub("encoder")
	for _, m := range []*layers.Module{enc, enc.Sub("block"), root.Sub("encoder2")} {
		if _, err := layers.NewDense(m, "dense_1", layers.DenseConfig{In: 2, Units: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := layers.NewBatchNorm(enc, "bn", layers.BatchNormLayerConfig{Channels: 2}); err != nil {
		t.Fatal(err)
	}
	encVars := []string{"encoder/dense_1/kernel", "encoder/dense_1/bias", "encoder/block/dense_1/kernel", "encoder/block/dense_1/bias",
		"encoder/bn/gamma", "encoder/bn/beta", "encoder/bn/moving_mean", "encoder/bn/moving_variance"}
	all := append(encVars[:4:4], "encoder2/dense_1/kernel", "encoder2/dense_1/bias", "encoder/bn/gamma", "encoder/bn/beta", "encoder/bn/moving_mean", "encoder/bn/moving_variance")
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{"encoder", enc.Names(), encVars},
		{"encoder/block", enc.Sub("block").Names(), encVars[2:4]},
		{"root", root.Names(), all},
		{"store", store.Names(), all},
		{"weights", sortedKeys(store.Weights()), sortedKeys(map[string]bool{
			"encoder/dense_1/kernel": true, "encoder/dense_1/bias": true, "encoder/block/dense_1/kernel": true, "encoder/block/dense_1/bias": true,
			"encoder2/dense_1/kernel": true, "encoder2/dense_1/bias": true, "encoder/bn/gamma": true, "encoder/bn/beta": true})},
		{"nodes", sortedKeys(enc.Sub("block").Nodes()), encVars[2:4]},
	} {
		if diff := cmp.Diff(tc.want, tc.got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if n := enc.Sub("block").Nodes()["encoder/block/dense_1/kernel"]; n == nil || n.Name() != "encoder/block/dense_1/kernel" {
		t.Errorf("node of encoder/block/dense_1/kernel: %v", n)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// sharedModel applies one encoder (dense, ReLU, batch norm) to the features
// "a" and "b" and one head to both: y = head(bn(enc(a))) + head(enc(b)),
// mean squared error against "y". Batch norm is applied in training to a's
// hidden units only, out of training to none.
func sharedModel(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	root := layers.NewModule(s, "")
	enc := root.Sub("encoder")
	hidden, err := layers.NewDense(enc, "dense_1", layers.DenseConfig{In: 2, Units: 3, Activation: layers.ReLU, Dtype: tensor.Float64, BiasInit: towers.Constant(0.1)})
	if err != nil {
		return nil, err
	}
	bn, err := layers.NewBatchNorm(enc, "bn", layers.BatchNormLayerConfig{Channels: 3, Dtype: tensor.Float64, BatchNormConfig: layers.BatchNormConfig{Momentum: 0.5}})
	if err != nil {
		return nil, err
	}
	head, err := layers.NewDense(root, "head", layers.DenseConfig{In: 3, Units: 1, Dtype: tensor.Float64})
	if err != nil {
		return nil, err
	}
	ha, err := hidden.Apply(features["a"])
	if err != nil {
		return nil, err
	}
	if ha, err = bn.Apply(ha, mode == model.Train); err != nil {
		return nil, err
	}
	hb, err := hidden.Apply(features["b"])
	if err != nil {
		return nil, err
	}
	ya, err := head.Apply(ha)
	if err != nil {
		return nil, err
	}
	yb, err := head.Apply(hb)
	if err != nil {
		return nil, err
	}
	y, err := G.Add(ya, yb)
	if err != nil {
		return nil, err
	}
	spec := &model.Spec{Predictions: map[string]*G.Node{"y": y}}
	if mode == model.Predict {
		return spec, nil
	}
	if spec.Loss, err = layers.MeanSquaredError(y, labels["y"]); err != nil {
		return nil, err
	}
	return spec, nil
}

// TestLayerAppliedTwiceTowers: under replication each tower's layers
// resolve to the same masters by name, and two towers train a model that
// applies its layers twice as one device does on the whole batch.
func TestLayerAppliedTwiceTowers(t *testing.T) {
	const rows = 9 // uneven: 5 + 4
	r := rand.New(rand.NewPCG(5, 6))
	vals := randomValues(r, tensor.Float64, []tensor.Shape{{rows, 2}, {rows, 2}, {rows, 1}})
	feats := map[string]*tensor.Dense{"a": vals[0], "b": vals[1]}
	labels := map[string]*tensor.Dense{"y": vals[2]}
	train := func(devices int) ([]string, map[string][]float64) {
		ds := make([]towers.Device, devices)
		for i := range ds {
			ds[i] = towers.CPU(i)
		}
		est, err := estimator.New(replicate.ModelFn(sharedModel, replicate.Config{Devices: ds, Optimizer: optimizers.SGD(0.2)}), estimator.RunConfig{Seed: 3, LogEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer est.Close()
		in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: rows, Epochs: estimator.Forever})
		if err != nil {
			t.Fatal(err)
		}
		if err := est.Train(context.Background(), in, estimator.Steps(2)); err != nil {
			t.Fatal(err)
		}
		return est.VariableNames(), vartest.Variables(t, est)
	}
	wantNames, want := train(1)
	names, got := train(2)
	modelVars := []string{"encoder/dense_1/kernel", "encoder/dense_1/bias", "encoder/bn/gamma", "encoder/bn/beta",
		"encoder/bn/moving_mean", "encoder/bn/moving_variance", "head/kernel", "head/bias"}
	for _, n := range modelVars {
		if _, ok := got[n]; !ok {
			t.Errorf("two towers: no variable %q (have %v)", n, names)
		}
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("variables of two towers differ from one device's (-one +two):\n%s", diff)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-12, 1e-12)); diff != "" {
		t.Errorf("two towers trained differently from one device (-one +two):\n%s", diff)
	}
}

// ExampleModule makes an encoder whose dense layer is applied to two
// inputs: one kernel and one bias, named by the module's path.
func ExampleModule() {
	store := towers.NewStore(towers.StoreConfig{Seed: 1})
	s := towers.NewScope(0, 1, towers.CPU(0), store, nil)
	enc := layers.NewModule(s, "encoder")
	d, err := layers.NewDense(enc, "dense_1", layers.DenseConfig{In: 3, Units: 2, Activation: layers.ReLU})
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"left", "right"} {
		x := towers.NewNode(s.Graph(), tensor.Float32, tensor.Shape{4, 3}, name)
		if _, err := d.Apply(x); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(enc.Names())
	fmt.Println(store.Names())
	_, err = layers.NewDense(enc, "dense_1", layers.DenseConfig{In: 3, Units: 5})
	fmt.Println(err)
	// Output:
	// [encoder/dense_1/kernel encoder/dense_1/bias]
	// [encoder/dense_1/kernel encoder/dense_1/bias]
	// layers.NewDense("encoder/dense_1"): tower 0 (/device:CPU:0): variable "encoder/dense_1/kernel" asked with shape (3, 5) dtype float32, earlier in this tower with shape (3, 2) dtype float32 (one name is one variable: asked twice, as by two layers of one name, it is shared and must agree)
}
