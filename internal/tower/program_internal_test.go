package tower

import (
	"errors"
	"fmt"
	"hash"
	"testing"

	"github.com/chewxy/hm"
	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/towers"
)

// fnOp is a one-argument op whose output has its input's type and shape
// and whose Do is do. It has no gradient.
type fnOp struct {
	name string
	do   func(G.Value) (G.Value, error)
}

func (o fnOp) Arity() int { return 1 }
func (o fnOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (o fnOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (o fnOp) Do(in ...G.Value) (G.Value, error) { return o.do(in[0]) }
func (o fnOp) ReturnsPtr() bool                  { return false }
func (o fnOp) CallsExtern() bool                 { return false }
func (o fnOp) OverwritesInput() int              { return -1 }
func (o fnOp) WriteHash(h hash.Hash)             { fmt.Fprint(h, o.name) }
func (o fnOp) Hashcode() uint32                  { return uint32(len(o.name)) }
func (o fnOp) String() string                    { return o.name }

// model builds a graph on tw and returns the nodes to compare after a run.
type model func(t *testing.T, tw *Tower) []*G.Node

func input(t *testing.T, tw *Tower, name string, shape ...int) *G.Node {
	t.Helper()
	n, err := tw.Input(name, tensor.Float64, shape)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// withGradients appends loss and its gradients with respect to every
// variable of tw to nodes.
func withGradients(t *testing.T, tw *Tower, loss *G.Node, nodes ...*G.Node) []*G.Node {
	t.Helper()
	gs, err := tw.Gradients(loss, tw.VariableNames())
	if err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, loss)
	for _, name := range tw.VariableNames() {
		if g, ok := gs[name]; ok {
			nodes = append(nodes, g)
		}
	}
	return nodes
}

var programModels = map[string]model{
	// gorgonia's own ops: a dense layer with a sigmoid and a squared error.
	"gorgonia mlp": func(t *testing.T, tw *Tower) []*G.Node {
		x, y := input(t, tw, "x", 4, 3), input(t, tw, "y", 4, 2)
		w := tw.MustVariable("w", tensor.Float64, tensor.Shape{3, 2}, towers.GlorotUniform())
		b := tw.MustVariable("b", tensor.Float64, tensor.Shape{2}, towers.Constant(0.1))
		h := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))
		p := G.Must(G.Sigmoid(h))
		loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(p, y))))))
		return withGradients(t, tw, loss, h, p)
	},
	// towerflow's layers, whose ops keep their buffers between runs.
	"layers cnn": func(t *testing.T, tw *Tower) []*G.Node {
		x, y := input(t, tw, "x", 2, 2, 6, 6), input(t, tw, "y", 2, 3)
		k := tw.MustVariable("k", tensor.Float64, tensor.Shape{4, 2, 3, 3}, towers.GlorotUniform())
		kb := tw.MustVariable("kb", tensor.Float64, tensor.Shape{4}, towers.Constant(0.01))
		c := G.Must(layers.Conv2D(x, k, kb, layers.Conv{Padding: [2]int{1, 1}, Activation: layers.ReLU}))
		pool := G.Must(layers.MaxPool2D(c, [2]int{2, 2}, [2]int{2, 2}))
		flat := G.Must(G.Reshape(pool, tensor.Shape{2, 36}))
		w := tw.MustVariable("w", tensor.Float64, tensor.Shape{36, 3}, towers.GlorotUniform())
		b := tw.MustVariable("b", tensor.Float64, tensor.Shape{3}, towers.Constant(0))
		p := G.Must(layers.Dense(flat, w, b, layers.Linear))
		loss := G.Must(layers.MeanSquaredError(p, y))
		return withGradients(t, tw, loss, c, pool, p)
	},
	// One node used twice by the same op, and a gradient that is the
	// output gradient passed through unchanged (the sum's).
	"shared argument": func(t *testing.T, tw *Tower) []*G.Node {
		x := input(t, tw, "x", 3)
		w := tw.MustVariable("w", tensor.Float64, tensor.Shape{3}, towers.Constant(0.5))
		s := G.Must(G.Add(x, w))
		sq := G.Must(G.HadamardProd(s, s))
		loss := G.Must(G.Sum(G.Must(G.Add(G.Must(G.Tanh(sq)), w))))
		return withGradients(t, tw, loss, s, sq)
	},
}

var programFeeds = map[string][][]float64{
	"x": {{0.5, -1, 2, 0.25, -0.75, 1.5, 3, -2, 1, 0.1, 0.2, 0.3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
	"y": {{1, 0, 0, 1, 1, 0, 0, 1}, {0.5, 0.5, 0, 1, 0.25, 0.75, 1, 0}},
}

// feedAll feeds every input of tw from programFeeds (round r), cycling the
// numbers to the input's size.
func feedAll(t *testing.T, tw *Tower, r int) {
	t.Helper()
	for _, name := range tw.inOrder {
		n := tw.inputs[name]
		src := programFeeds[name][r]
		data := make([]float64, n.Shape().TotalSize())
		for i := range data {
			data[i] = src[i%len(src)] * float64(1+i/len(src))
		}
		if err := tw.Feed(name, tensor.New(tensor.WithShape(n.Shape()...), tensor.WithBacking(data))); err != nil {
			t.Fatal(err)
		}
	}
}

// runModel builds m on a fresh tower, runs it twice with different inputs
// and returns every compared node's data after each run, and whether the
// tower ran its own program.
func runModel(t *testing.T, m model, tape bool) ([][][]float64, bool) {
	t.Helper()
	runs, prog := runTower(t, m, tape, feedAll)
	return runs, prog != nil
}

// runTower builds m on a fresh tower (the tape machine's with tape), runs
// it twice, feeding run r's inputs with feed, and returns every compared
// node's data after each run and the tower's program (nil where the tape
// machine ran).
func runTower(t *testing.T, m model, tape bool, feed func(t *testing.T, tw *Tower, r int)) ([][][]float64, *program) {
	t.Helper()
	tapeOnly = tape
	defer func() { tapeOnly = false }()
	tw := New(towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil), nil)
	nodes := m(t, tw)
	for _, n := range nodes {
		if err := tw.Watch(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Compile(); err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	var runs [][][]float64
	for r := range 2 {
		feed(t, tw, r)
		if err := tw.Run(); err != nil {
			t.Fatal(err)
		}
		var vals [][]float64
		for _, n := range nodes {
			v, err := tw.Value(n)
			if err != nil {
				t.Fatal(err)
			}
			f, err := numeric.Float64s(v)
			if err != nil {
				t.Fatalf("node %v: %v", n.Name(), err)
			}
			vals = append(vals, f)
		}
		runs = append(runs, vals)
	}
	return runs, tw.prog
}

// TestProgramMatchesTapeMachine: a tower running its own program computes
// every watched value, gradients included, exactly as gorgonia's tape
// machine does, over two runs with different inputs (stale buffers would
// show in the second).
func TestProgramMatchesTapeMachine(t *testing.T) {
	for name, m := range programModels {
		t.Run(name, func(t *testing.T) {
			got, own := runModel(t, m, false)
			want, _ := runModel(t, m, true)
			if !own {
				t.Fatal("the tower did not run its own program")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("program vs tape machine (-tape +program):\n%s", diff)
			}
		})
	}
}

// TestProgramCopiesValuesSharingLeaves: a watched value an op passed
// through from a variable is a copy, so changing it in place (as a
// gradient reduction may) leaves the variable alone; one the op computed
// is the op's own.
func TestProgramCopiesValuesSharingLeaves(t *testing.T) {
	pass := fnOp{name: "pass", do: func(v G.Value) (G.Value, error) { return v, nil }}
	double := fnOp{name: "double", do: func(v G.Value) (G.Value, error) {
		d := v.Data().([]float64)
		out := make([]float64, len(d))
		for i := range d {
			out[i] = 2 * d[i]
		}
		return tensor.New(tensor.WithShape(len(out)), tensor.WithBacking(out)), nil
	}}
	for _, c := range []struct {
		name       string
		op         fnOp
		wantCopies int
		want       []float64
	}{
		{name: "passed through", op: pass, wantCopies: 1, want: []float64{3, 3}},
		{name: "computed", op: double, wantCopies: 0, want: []float64{6, 6}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := towers.NewStore(towers.StoreConfig{})
			tw := New(towers.NewScope(0, 1, towers.CPU(0), store, nil), nil)
			w := tw.MustVariable("w", tensor.Float64, tensor.Shape{2}, towers.Constant(3))
			out := G.Must(G.ApplyOp(c.op, w))
			if err := tw.Watch(out); err != nil {
				t.Fatal(err)
			}
			if err := tw.Compile(); err != nil {
				t.Fatal(err)
			}
			for r := range 2 {
				if err := tw.Run(); err != nil {
					t.Fatal(err)
				}
				v, err := tw.Value(out)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(c.want, v.Data()); diff != "" {
					t.Errorf("run %d: value (-want +got):\n%s", r, diff)
				}
				if v != out.Value() {
					t.Errorf("run %d: Node.Value is not Tower.Value", r)
				}
				v.Data().([]float64)[0] = -1 // what an in-place reduction would do
			}
			if got := len(tw.prog.copies); got != c.wantCopies {
				t.Errorf("%d values copied, want %d", got, c.wantCopies)
			}
			master, _ := store.Lookup("w")
			if diff := cmp.Diff([]float64{3, 3}, master.Data()); diff != "" {
				t.Errorf("variable after changing the value (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProgramErrorsNameTheNode: an op that fails, returns nothing, returns
// the wrong shape or panics gives an error naming the tower and the node.
func TestProgramErrorsNameTheNode(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name  string
		do    func(G.Value) (G.Value, error)
		want  []string
		panic bool
	}{
		{name: "fails", do: func(G.Value) (G.Value, error) { return nil, boom }, want: []string{"tower 0", "probe_fails", "boom"}},
		{name: "no value", do: func(G.Value) (G.Value, error) { return nil, nil }, want: []string{"tower 0", "probe_no value", "no value"}},
		{name: "wrong shape", do: func(G.Value) (G.Value, error) {
			return tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 2, 3})), nil
		}, want: []string{"tower 0", "probe_wrong shape", "(2)", "(3)"}},
		{name: "panics", do: func(G.Value) (G.Value, error) { panic("index out of range") }, want: []string{"tower 0", "run", "index out of range"}, panic: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tw := New(towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil), nil)
			x := input(t, tw, "x", 2)
			out := G.Must(G.ApplyOp(fnOp{name: "probe_" + c.name, do: c.do}, x))
			G.WithName("probe_" + c.name)(out)
			if err := tw.Compile(); err != nil {
				t.Fatal(err)
			}
			if err := tw.Feed("x", tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, 2}))); err != nil {
				t.Fatal(err)
			}
			err := tw.Run()
			wanterr.Mentions(t, err, c.want...)
			var pe *PanicError
			if got := errors.As(err, &pe); got != c.panic {
				t.Errorf("a *PanicError: %v, want %v", got, c.panic)
			}
			if !c.panic && c.name == "fails" && !errors.Is(err, boom) {
				t.Errorf("error %v does not wrap the op's", err)
			}
		})
	}
}

// TestProgramLeavesStatementsToTheTapeMachine: a graph holding a statement
// of the model's own (G.Read, G.Set) runs on gorgonia's tape machine. What
// G.Read read is checked; what G.Set does is gorgonia's affair.
func TestProgramLeavesStatementsToTheTapeMachine(t *testing.T) {
	for _, c := range []struct {
		name string
		// build adds the statement to y = x ⊙ w and returns what it
		// produced after a run, or nil.
		build func(tw *Tower, y *G.Node) func() G.Value
		want  []float64
	}{
		{"G.Read", func(_ *Tower, y *G.Node) func() G.Value {
			var read G.Value
			G.Read(y, &read)
			return func() G.Value { return read }
		}, []float64{3, 6}},
		{"G.Set", func(tw *Tower, y *G.Node) func() G.Value {
			v := tw.MustVariable("v", tensor.Float64, tensor.Shape{2}, towers.Constant(0))
			G.Set(v, y)
			return nil
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tw := New(towers.NewScope(0, 1, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil), nil)
			x := input(t, tw, "x", 2)
			w := tw.MustVariable("w", tensor.Float64, tensor.Shape{2}, towers.Constant(3))
			got := c.build(tw, G.Must(G.HadamardProd(x, w)))
			if err := tw.Compile(); err != nil {
				t.Fatal(err)
			}
			if tw.prog != nil || tw.vm == nil {
				t.Fatal("the graph was not given to the tape machine")
			}
			if err := tw.Feed("x", tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, 2}))); err != nil {
				t.Fatal(err)
			}
			if err := tw.Run(); err != nil {
				t.Fatal(err)
			}
			if got == nil {
				return
			}
			v := got()
			if v == nil {
				t.Fatal("no value after the run")
			}
			if diff := cmp.Diff(c.want, v.Data()); diff != "" {
				t.Errorf("after the run (-want +got):\n%s", diff)
			}
		})
	}
}
