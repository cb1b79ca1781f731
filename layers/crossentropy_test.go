package layers_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/layers"
)

// lossNet is a loss of logits under test, with its gradient with respect
// to the logits (labels and weights are fixed inputs).
type lossNet struct {
	logits      *G.Node
	fixed       []*G.Node
	loss, grad  G.Value
	vm          G.VM
	fixedValues []*tensor.Dense
}

func newLossNet(t *testing.T, dt tensor.Dtype, logits tensor.Shape, fixed []*tensor.Dense, body func(x *G.Node, fixed []*G.Node) (*G.Node, error)) *lossNet {
	t.Helper()
	g := G.NewGraph()
	n := &lossNet{logits: G.NewTensor(g, dt, len(logits), G.WithShape(logits...), G.WithName("logits")), fixedValues: fixed}
	for i, f := range fixed {
		n.fixed = append(n.fixed, G.NewTensor(g, f.Dtype(), f.Dims(), G.WithShape(f.Shape()...), G.WithName(fmt.Sprintf("fixed%d", i))))
	}
	loss, err := body(n.logits, n.fixed)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	grads, err := G.Grad(loss, n.logits)
	if err != nil {
		t.Fatalf("grad: %v", err)
	}
	G.Read(loss, &n.loss)
	G.Read(grads[0], &n.grad)
	n.vm = G.NewTapeMachine(g)
	t.Cleanup(func() { n.vm.Close() })
	return n
}

// run returns the loss and the logits' gradient for logits x.
func (n *lossNet) run(t *testing.T, x *tensor.Dense) (float64, []float64, error) {
	t.Helper()
	n.vm.Reset()
	if err := G.Let(n.logits, x); err != nil {
		t.Fatal(err)
	}
	for i, f := range n.fixedValues {
		if err := G.Let(n.fixed[i], f); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.vm.RunAll(); err != nil {
		return 0, nil, err
	}
	l, err := numeric.Float64s(n.loss)
	if err != nil {
		t.Fatal(err)
	}
	g, err := numeric.Float64s(n.grad)
	if err != nil {
		t.Fatal(err)
	}
	return l[0], g, nil
}

// tensorOf makes a tensor of dtype dt from float64 values.
func tensorOf(dt tensor.Dtype, shape tensor.Shape, vals []float64) *tensor.Dense {
	var s any
	switch dt {
	case tensor.Int64:
		s = convertTo[int64](vals)
	case tensor.Int32:
		s = convertTo[int32](vals)
	case tensor.Float32:
		s = convertTo[float32](vals)
	default:
		s = append([]float64(nil), vals...)
	}
	return numeric.Over(shape, s)
}

func convertTo[T int32 | int64 | float32](vals []float64) []T {
	out := make([]T, len(vals))
	for i, v := range vals {
		out[i] = T(v)
	}
	return out
}

// refSoftmaxXent is the mean softmax cross-entropy written directly:
// −Σᵢ wᵢ Σₖ tᵢₖ log softmax(xᵢ)ₖ / N, with the targets already smoothed.
func refSoftmaxXent(x, targets, w []float64, n, k int) float64 {
	total := 0.0
	for i := range n {
		row := x[i*k : (i+1)*k]
		m := row[0]
		for _, v := range row {
			m = math.Max(m, v)
		}
		z := 0.0
		for _, v := range row {
			z += math.Exp(v - m)
		}
		for j, v := range row {
			total -= w[i] * targets[i*k+j] * (v - m - math.Log(z))
		}
	}
	return total / float64(n)
}

func refSigmoidXent(x, targets, w []float64, n, k int) float64 {
	total := 0.0
	for i := range n {
		for j := range k {
			p := 1 / (1 + math.Exp(-x[i*k+j]))
			z := targets[i*k+j]
			total -= w[i] * (z*math.Log(p) + (1-z)*math.Log(1-p))
		}
	}
	return total / float64(n*k)
}

// TestCrossEntropy: each loss's value against the formula written
// directly, and its gradient against central finite differences, in
// float32 and float64, with integer and float class ids, example weights
// and label smoothing; and the softmax rows that gorgonia/tensor's SoftMax
// gets wrong.
func TestCrossEntropy(t *testing.T) {
	const n, k = 4, 3
	r := rand.New(rand.NewPCG(1, 2))
	logits := make([]float64, n*k)
	for i := range logits {
		logits[i] = 2 * r.NormFloat64()
	}
	classes := []float64{2, 0, 1, 2}
	onehot := make([]float64, n*k)
	for i, c := range classes {
		onehot[i*k+int(c)] = 1
	}
	probs := make([]float64, n*k)
	for i := range n {
		a, b := r.Float64(), r.Float64()
		probs[i*k], probs[i*k+1], probs[i*k+2] = a/(1+a+b), b/(1+a+b), 1/(1+a+b)
	}
	bits := make([]float64, n*k)
	for i := range bits {
		bits[i] = float64(r.IntN(2))
	}
	ones, weights := []float64{1, 1, 1, 1}, []float64{0.5, 2, 0, 1}
	smooth := func(t []float64, eps, classes float64) []float64 {
		out := make([]float64, len(t))
		for i, v := range t {
			out[i] = (1-eps)*v + eps/classes
		}
		return out
	}
	type loss func(x, y *G.Node, opts ...layers.LossOption) (*G.Node, error)
	tests := []struct {
		name     string
		fn       loss
		labels   *tensor.Dense
		weights  []float64
		eps      float64
		logits   []float64
		want     float64
		wantGrad bool
	}{
		{name: "sparse int64", fn: layers.SparseSoftmaxCrossEntropy, labels: tensorOf(tensor.Int64, tensor.Shape{n}, classes), weights: ones, want: refSoftmaxXent(logits, onehot, ones, n, k)},
		{name: "sparse int32 weighted", fn: layers.SparseSoftmaxCrossEntropy, labels: tensorOf(tensor.Int32, tensor.Shape{n}, classes), weights: weights, want: refSoftmaxXent(logits, onehot, weights, n, k)},
		{name: "sparse float smoothed", fn: layers.SparseSoftmaxCrossEntropy, labels: tensorOf(tensor.Float64, tensor.Shape{n}, classes), weights: ones, eps: 0.1, want: refSoftmaxXent(logits, smooth(onehot, 0.1, k), ones, n, k)},
		{name: "dense one-hot", fn: layers.SoftmaxCrossEntropy, labels: tensorOf(tensor.Float64, tensor.Shape{n, k}, onehot), weights: ones, want: refSoftmaxXent(logits, onehot, ones, n, k)},
		{name: "dense probabilities weighted smoothed", fn: layers.SoftmaxCrossEntropy, labels: tensorOf(tensor.Float64, tensor.Shape{n, k}, probs), weights: weights, eps: 0.2, want: refSoftmaxXent(logits, smooth(probs, 0.2, k), weights, n, k)},
		{name: "sigmoid", fn: layers.SigmoidCrossEntropy, labels: tensorOf(tensor.Float64, tensor.Shape{n, k}, bits), weights: ones, want: refSigmoidXent(logits, bits, ones, n, k)},
		{name: "sigmoid weighted smoothed", fn: layers.SigmoidCrossEntropy, labels: tensorOf(tensor.Float64, tensor.Shape{n, k}, bits), weights: weights, eps: 0.1, want: refSigmoidXent(logits, smooth(bits, 0.1, 2), weights, n, k)},
		// Row 2's softmax from its own maximum: gorgonia/tensor's SoftMax
		// takes the first element's (200) and gives +Inf there.
		{name: "softmax rows", fn: layers.SparseSoftmaxCrossEntropy, labels: tensorOf(tensor.Int64, tensor.Shape{2}, []float64{0, 2}), weights: []float64{1, 1},
			logits: []float64{200, 0, 0, 0, 1, 2}, want: (math.Log(1+2*math.Exp(-200)) + math.Log(math.Exp(-2)+math.Exp(-1)+1)) / 2},
	}
	for _, tc := range tests {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				x := logits
				if tc.logits != nil {
					x = tc.logits
				}
				shape := tensor.Shape{len(tc.weights), len(x) / len(tc.weights)}
				labels := tc.labels
				if labels.Dtype() == tensor.Float64 && tc.fn != nil && labels.Dims() == 2 {
					f, _ := numeric.SliceFloat64s(labels.Data())
					labels = tensorOf(dt, labels.Shape(), f)
				}
				fixed := []*tensor.Dense{labels, tensorOf(dt, tensor.Shape{len(tc.weights)}, tc.weights)}
				net := newLossNet(t, dt, shape, fixed, func(x *G.Node, f []*G.Node) (*G.Node, error) {
					return tc.fn(x, f[0], layers.ExampleWeights(f[1]), layers.LabelSmoothing(tc.eps))
				})
				got, grad, err := net.run(t, tensorOf(dt, shape, x))
				if err != nil {
					t.Fatal(err)
				}
				tol := 1e-12
				if dt == tensor.Float32 {
					tol = 1e-5
				}
				if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(tol, tol)); diff != "" {
					t.Errorf("loss (-want +got):\n%s", diff)
				}
				if dt != tensor.Float64 {
					return
				}
				// Central differences of the loss, in float64.
				const h = 1e-6
				num := make([]float64, len(x))
				for i := range x {
					p := append([]float64(nil), x...)
					p[i] += h
					lp, _, _ := net.run(t, tensorOf(dt, shape, p))
					p[i] -= 2 * h
					lm, _, _ := net.run(t, tensorOf(dt, shape, p))
					num[i] = (lp - lm) / (2 * h)
				}
				if diff := cmp.Diff(num, grad, cmpopts.EquateApprox(1e-6, 1e-7)); diff != "" {
					t.Errorf("gradient (-finite differences +op):\n%s", diff)
				}
			})
		}
	}
}

// TestCrossEntropyAgainstGorgonia: the sparse loss and its gradient equal
// the same loss assembled from gorgonia's ops (on logits where gorgonia's
// SoftMax is right).
func TestCrossEntropyAgainstGorgonia(t *testing.T) {
	const n, k = 5, 4
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float64, n*k)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	classes := []float64{3, 1, 0, 2, 1}
	onehot := make([]float64, n*k)
	for i, c := range classes {
		onehot[i*k+int(c)] = 1
	}
	ours := newLossNet(t, tensor.Float64, tensor.Shape{n, k}, []*tensor.Dense{tensorOf(tensor.Int64, tensor.Shape{n}, classes)}, func(x *G.Node, f []*G.Node) (*G.Node, error) {
		return layers.SparseSoftmaxCrossEntropy(x, f[0])
	})
	theirs := newLossNet(t, tensor.Float64, tensor.Shape{n, k}, []*tensor.Dense{tensorOf(tensor.Float64, tensor.Shape{n, k}, onehot)}, func(x *G.Node, f []*G.Node) (*G.Node, error) {
		sm, err := G.SoftMax(x)
		if err != nil {
			return nil, err
		}
		logp := G.Must(G.Log(sm))
		return G.Neg(G.Must(G.Div(G.Must(G.Sum(G.Must(G.HadamardProd(f[0], logp)))), G.NewConstant(float64(n)))))
	})
	in := tensorOf(tensor.Float64, tensor.Shape{n, k}, x)
	l1, g1, err := ours.run(t, in)
	if err != nil {
		t.Fatal(err)
	}
	l2, g2, err := theirs.run(t, tensorOf(tensor.Float64, tensor.Shape{n, k}, x))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{l2, g2}, []any{l1, g1}, cmpopts.EquateApprox(1e-12, 1e-12)); diff != "" {
		t.Errorf("layers vs gorgonia (-gorgonia +layers):\n%s", diff)
	}
}

// TestSoftmaxAndArgMax: Softmax's rows (the rows case included) and its
// gradient through a weighted sum, ArgMax's classes (ties to the first).
func TestSoftmaxAndArgMax(t *testing.T) {
	x := []float64{200, 0, 0, 0, 1, 2, -1, 3, 3}
	wts := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	want := make([]float64, len(x))
	for r := 0; r < 3; r++ {
		row := x[r*3 : r*3+3]
		m := math.Max(row[0], math.Max(row[1], row[2]))
		z := math.Exp(row[0]-m) + math.Exp(row[1]-m) + math.Exp(row[2]-m)
		for j := range 3 {
			want[r*3+j] = math.Exp(row[j]-m) / z
		}
	}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			g := G.NewGraph()
			in := G.NewTensor(g, dt, 2, G.WithShape(3, 3), G.WithName("x"), G.WithValue(tensorOf(dt, tensor.Shape{3, 3}, x)))
			w := G.NewTensor(g, dt, 2, G.WithShape(3, 3), G.WithName("w"), G.WithValue(tensorOf(dt, tensor.Shape{3, 3}, wts)))
			sm, err := layers.Softmax(in)
			if err != nil {
				t.Fatal(err)
			}
			am, err := layers.ArgMax(in)
			if err != nil {
				t.Fatal(err)
			}
			loss := G.Must(G.Sum(G.Must(G.HadamardProd(sm, w))))
			grads, err := G.Grad(loss, in)
			if err != nil {
				t.Fatal(err)
			}
			var smv, amv, gv G.Value
			G.Read(sm, &smv)
			G.Read(am, &amv)
			G.Read(grads[0], &gv)
			vm := G.NewTapeMachine(g)
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			got, _ := numeric.Float64s(smv)
			if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-6, 1e-7)); diff != "" {
				t.Errorf("softmax (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]int64{0, 2, 1}, amv.Data()); diff != "" {
				t.Errorf("argmax (-want +got):\n%s", diff)
			}
			// d/dx_j Σ_k w_k p_k = p_j (w_j − Σ_k w_k p_k).
			wantGrad := make([]float64, len(x))
			for r := range 3 {
				dot := 0.0
				for j := range 3 {
					dot += wts[r*3+j] * want[r*3+j]
				}
				for j := range 3 {
					wantGrad[r*3+j] = want[r*3+j] * (wts[r*3+j] - dot)
				}
			}
			gg, _ := numeric.Float64s(gv)
			if diff := cmp.Diff(wantGrad, gg, cmpopts.EquateApprox(1e-5, 1e-6)); diff != "" {
				t.Errorf("softmax gradient (-want +got):\n%s", diff)
			}
		})
	}
}

// TestL2Loss: Σ w²/2 over several weights, and gradient w.
func TestL2Loss(t *testing.T) {
	g := G.NewGraph()
	a := G.NewTensor(g, tensor.Float64, 2, G.WithShape(2, 2), G.WithName("a"), G.WithValue(tensorOf(tensor.Float64, tensor.Shape{2, 2}, []float64{1, -2, 3, 0.5})))
	b := G.NewTensor(g, tensor.Float64, 1, G.WithShape(3), G.WithName("b"), G.WithValue(tensorOf(tensor.Float64, tensor.Shape{3}, []float64{-1, 4, 2})))
	l, err := layers.L2Loss(a, b)
	if err != nil {
		t.Fatal(err)
	}
	scaled := G.Must(G.Mul(l, G.NewConstant(3.0)))
	grads, err := G.Grad(scaled, a, b)
	if err != nil {
		t.Fatal(err)
	}
	var lv, ga, gb G.Value
	G.Read(l, &lv)
	G.Read(grads[0], &ga)
	G.Read(grads[1], &gb)
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	got := []any{lv.Data(), ga.Data(), gb.Data()}
	want := []any{(1 + 4 + 9 + 0.25 + 1 + 16 + 4) / 2.0, []float64{3, -6, 9, 1.5}, []float64{-3, 12, 6}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("L2Loss (-want +got):\n%s", diff)
	}
}

// TestLossErrors: inputs the losses cannot take are errors naming what is
// wrong; an out-of-range class id is an error of the run naming the row.
func TestLossErrors(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 2, G.WithShape(2, 3), G.WithName("x"))
	ids := G.NewTensor(g, tensor.Int64, 1, G.WithShape(2), G.WithName("ids"))
	wrongRows := G.NewTensor(g, tensor.Int64, 1, G.WithShape(3), G.WithName("ids3"))
	boolLabels := G.NewTensor(g, tensor.Bool, 1, G.WithShape(2), G.WithName("flags"))
	y32 := G.NewTensor(g, tensor.Float32, 2, G.WithShape(2, 3), G.WithName("y32"))
	w3 := G.NewTensor(g, tensor.Float64, 1, G.WithShape(3), G.WithName("w3"))
	tests := []struct {
		name string
		call func() (*G.Node, error)
		want string
	}{
		{"label rows", func() (*G.Node, error) { return layers.SparseSoftmaxCrossEntropy(x, wrongRows) }, "labels ids3 have shape (3), want (2)"},
		{"label dtype", func() (*G.Node, error) { return layers.SparseSoftmaxCrossEntropy(x, boolLabels) }, "labels flags have dtype bool"},
		{"dense dtype", func() (*G.Node, error) { return layers.SoftmaxCrossEntropy(x, y32) }, "y32 has dtype float32 but x has float64"},
		{"weights shape", func() (*G.Node, error) { return layers.SparseSoftmaxCrossEntropy(x, ids, layers.ExampleWeights(w3)) }, "weights w3 have shape (3), want (2)"},
		{"smoothing", func() (*G.Node, error) { return layers.SparseSoftmaxCrossEntropy(x, ids, layers.LabelSmoothing(1)) }, "LabelSmoothing(1): want a value in [0, 1)"},
		{"argmax rank", func() (*G.Node, error) { return layers.ArgMax(ids) }, "ArgMax: ids has dtype int64"},
		{"softmax rank", func() (*G.Node, error) { return layers.Softmax(w3) }, "logits w3 have shape (3), want (N, K)"},
		{"l2 nothing", func() (*G.Node, error) { return layers.L2Loss() }, "L2Loss: no weights"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	net := newLossNet(t, tensor.Float64, tensor.Shape{2, 3}, []*tensor.Dense{tensorOf(tensor.Int64, tensor.Shape{2}, []float64{1, 3})}, func(x *G.Node, f []*G.Node) (*G.Node, error) {
		return layers.SparseSoftmaxCrossEntropy(x, f[0])
	})
	_, _, err := net.run(t, tensorOf(tensor.Float64, tensor.Shape{2, 3}, []float64{1, 2, 3, 4, 5, 6}))
	if want := "label of row 1 is 3, want a class id in [0, 3)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("out-of-range class: err = %v, want one containing %q", err, want)
	}
}
