package towers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/towers"
)

func TestParseDevice(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{"/gpu:0", "/device:GPU:0", ""},
		{"/GPU:0", "/device:GPU:0", ""},
		{"/device:CPU:0", "/device:CPU:0", ""},
		{"/device:cpu:3", "/device:CPU:3", ""},
		{"cpu:1", "/device:CPU:1", ""},
		{"/job:localhost/replica:0/task:0/device:GPU:1", "/device:GPU:1", ""},
		{"/tpu:0", "", "unknown device type"},
		{"/gpu:x", "", "not a non-negative integer"},
		{"/gpu:-1", "", "not a non-negative integer"},
		{"gpu", "", "want a name like"},
		{"/host:1/gpu:0", "", "unknown part"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			d, err := towers.ParseDevice(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.in) {
					t.Fatalf("got %v, want error mentioning %q and the input", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, d.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLocalDevicesAreCPUsWithoutGPUBackend(t *testing.T) {
	ds := towers.LocalDevices()
	if len(ds) == 0 {
		t.Fatal("no local devices")
	}
	for i, d := range ds {
		if diff := cmp.Diff(towers.CPU(i), d); diff != "" {
			t.Errorf("device %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestStoreGetOrCreate(t *testing.T) {
	s := towers.NewStore(towers.WithSeed(3))
	a, created, err := s.GetOrCreate(towers.VarSpec{Name: "a", Dtype: tensor.Float32, Shape: tensor.Shape{2}, Init: towers.Constant(1.5), Trainable: true})
	if err != nil || !created {
		t.Fatalf("create: %v, created=%v", err, created)
	}
	again, created, err := s.GetOrCreate(towers.VarSpec{Name: "a", Dtype: tensor.Float32, Shape: tensor.Shape{2}, Init: towers.Constant(9)})
	if err != nil || created || again != a {
		t.Fatalf("get: %v created=%v same=%v", err, created, again == a)
	}
	if diff := cmp.Diff([]float32{1.5, 1.5}, a.Data()); diff != "" {
		t.Errorf("value (-want +got):\n%s", diff)
	}
	errs := []struct {
		spec towers.VarSpec
		want string
	}{
		{towers.VarSpec{Name: "a", Dtype: tensor.Float32, Shape: tensor.Shape{3}}, "shape (2)"},
		{towers.VarSpec{Name: "a", Dtype: tensor.Float64, Shape: tensor.Shape{2}}, "float32"},
		{towers.VarSpec{Name: "", Dtype: tensor.Float64}, "empty name"},
		{towers.VarSpec{Name: "z", Dtype: tensor.Float64, Shape: tensor.Shape{0}}, "non-positive"},
		{towers.VarSpec{Name: "i", Dtype: tensor.Int64, Init: towers.Constant(1)}, "float dtype"},
	}
	for _, e := range errs {
		if _, _, err := s.GetOrCreate(e.spec); err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("%+v: got %v, want error with %q", e.spec, err, e.want)
		}
	}
	if _, err := s.Lookup("nope"); !errors.Is(err, towers.ErrNotFound) || !strings.Contains(err.Error(), "known: a") {
		t.Errorf("lookup: %v", err)
	}
}

// Random initial values depend on the seed and the name only, not on the
// order variables are created in.
func TestInitializerDependsOnNameNotOrder(t *testing.T) {
	spec := func(name string) towers.VarSpec {
		return towers.VarSpec{Name: name, Dtype: tensor.Float64, Shape: tensor.Shape{3}, Init: towers.RandomNormal(0, 1)}
	}
	s1, s2 := towers.NewStore(towers.WithSeed(5)), towers.NewStore(towers.WithSeed(5))
	a1, _, _ := s1.GetOrCreate(spec("a"))
	_, _, _ = s1.GetOrCreate(spec("b"))
	_, _, _ = s2.GetOrCreate(spec("b"))
	a2, _, _ := s2.GetOrCreate(spec("a"))
	if diff := cmp.Diff(a1.Data(), a2.Data()); diff != "" {
		t.Errorf("same seed and name, other order (-first +second):\n%s", diff)
	}
	s3 := towers.NewStore(towers.WithSeed(6))
	a3, _, _ := s3.GetOrCreate(spec("a"))
	if cmp.Equal(a1.Data(), a3.Data()) {
		t.Errorf("seeds 5 and 6 gave the same values %v", a1.Data())
	}
}

func TestPlacement(t *testing.T) {
	tests := []struct {
		name      string
		placement towers.Placement
		want      []string
	}{
		{"auto, CPUs", towers.AutoPlacement([]towers.Device{towers.CPU(0), towers.CPU(1)}), []string{"/device:CPU:0", "/device:CPU:0", "/device:CPU:0"}},
		{"auto, one GPU", towers.AutoPlacement([]towers.Device{towers.GPU(0)}), []string{"/device:GPU:0", "/device:GPU:0", "/device:GPU:0"}},
		{"auto, two GPUs", towers.AutoPlacement([]towers.Device{towers.GPU(0), towers.GPU(1)}), []string{"/device:CPU:0", "/device:CPU:0", "/device:CPU:0"}},
		{"round robin", towers.RoundRobin(towers.GPU(0), towers.GPU(1)), []string{"/device:GPU:0", "/device:GPU:1", "/device:GPU:0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := towers.NewStore(towers.WithPlacement(tc.placement))
			var got []string
			for _, n := range []string{"a", "b", "c"} {
				if _, _, err := s.GetOrCreate(towers.VarSpec{Name: n, Dtype: tensor.Float64}); err != nil {
					t.Fatal(err)
				}
				d, err := s.Device(n)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, d.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	s := towers.NewStore(towers.WithPlacement(towers.RoundRobin(towers.CPU(0), towers.CPU(1))))
	s.GetOrCreate(towers.VarSpec{Name: "a", Dtype: tensor.Float64})
	s.GetOrCreate(towers.VarSpec{Name: "b", Dtype: tensor.Float64})
	s.GetOrCreate(towers.VarSpec{Name: "b/slot", Dtype: tensor.Float64, Colocate: "b"})
	if d, _ := s.Device("b/slot"); d != towers.CPU(1) {
		t.Errorf("colocated slot on %v, want its variable's /device:CPU:1", d)
	}
}

func weightsStore(t *testing.T) *towers.Store {
	t.Helper()
	s := towers.NewStore()
	specs := []towers.VarSpec{
		{Name: "w", Dtype: tensor.Float32, Shape: tensor.Shape{2, 2}, Init: towers.Constant(1), Trainable: true},
		{Name: "step", Dtype: tensor.Int64},
		{Name: "b", Dtype: tensor.Float64, Init: towers.Constant(2), Trainable: true},
	}
	for _, sp := range specs {
		if _, _, err := s.GetOrCreate(sp); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestWeights(t *testing.T) {
	s := weightsStore(t)
	if got := s.FlatSize(); got != 5 {
		t.Errorf("flat size %d, want 5", got)
	}
	flat, err := s.Flat()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float64{1, 1, 1, 1, 2}, flat); diff != "" {
		t.Errorf("flat (-want +got):\n%s", diff)
	}
	if err := s.SetFlat([]float64{1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	ws := s.Weights()
	got := map[string]any{}
	for k, v := range ws {
		got[k] = v.Data()
	}
	if diff := cmp.Diff(map[string]any{"w": []float32{1, 2, 3, 4}, "b": 5.0}, got); diff != "" {
		t.Errorf("weights after SetFlat (-want +got):\n%s", diff)
	}
	// Weights are copies.
	ws["w"].Data().([]float32)[0] = 100
	if v, _ := s.Value("w"); v.Data().([]float32)[0] != 1 {
		t.Errorf("Weights returned a view, not a copy")
	}
	if err := s.SetWeights(map[string]*tensor.Dense{"b": tensor.New(tensor.FromScalar(7.0))}); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Value("b"); v.Data() != 7.0 {
		t.Errorf("b = %v after SetWeights, want 7", v.Data())
	}

	errs := []struct {
		name string
		do   func() error
		want []string
	}{
		{"unknown name", func() error {
			return s.SetWeights(map[string]*tensor.Dense{"nope": tensor.New(tensor.FromScalar(1.0))})
		}, []string{`"nope"`, "w, b"}},
		{"not a weight", func() error {
			return s.SetWeights(map[string]*tensor.Dense{"step": tensor.New(tensor.FromScalar(int64(1)))})
		}, []string{`"step"`, "not a weight"}},
		{"shape mismatch", func() error {
			return s.SetWeights(map[string]*tensor.Dense{"w": tensor.New(tensor.WithShape(4), tensor.WithBacking([]float32{1, 2, 3, 4}))})
		}, []string{`"w"`, "(2, 2)", "(4)"}},
		{"flat too short", func() error { return s.SetFlat([]float64{1, 2}) }, []string{"2 elements", "5"}},
		{"flat too long", func() error { return s.SetFlat(make([]float64, 6)) }, []string{"6 elements", "5"}},
	}
	for _, e := range errs {
		t.Run(e.name, func(t *testing.T) {
			err := e.do()
			wanterr.Mentions(t, err, e.want...)
		})
	}
	// A failed SetWeights writes nothing.
	if v, _ := s.Value("w"); !cmp.Equal(v.Data(), []float32{1, 2, 3, 4}) {
		t.Errorf("w changed by a failed call: %v", v.Data())
	}
}

// Two towers share masters through their own headers: an update of the
// master is seen by both on their next run, and their runs are concurrent.
func TestTowersShareMasters(t *testing.T) {
	s := towers.NewStore()
	t0 := towers.New(0, towers.CPU(0), s, nil)
	t1 := towers.New(1, towers.CPU(1), s, t0)
	var outs []*G.Node
	for _, tw := range []*towers.Scope{t0, t1} {
		w := tw.MustVariable("w", tensor.Float64, tensor.Shape{2, 2}, towers.Constant(1))
		x, err := tw.Input("x", tensor.Float64, tensor.Shape{3, 2})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, G.Must(G.Sum(G.Must(G.Mul(x, w)))))
		if err := tw.Compile(); err != nil {
			t.Fatal(err)
		}
		if err := tw.Feed("x", tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 1, 1, 1, 1, float64(tw.Index())}))); err != nil {
			t.Fatal(err)
		}
	}
	ts := []*towers.Scope{t0, t1}
	run := func() []float64 {
		if err := towers.RunAll(context.Background(), ts, (*towers.Scope).Run); err != nil {
			t.Fatal(err)
		}
		return []float64{outs[0].Value().Data().(float64), outs[1].Value().Data().(float64)}
	}
	if diff := cmp.Diff([]float64{10, 12}, run()); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
	w, _ := s.Lookup("w")
	// w = [[3 1] [1 1]]: a row [a b] of x adds 4a+2b... summed: 16 and 18.
	w.Data().([]float64)[0] = 3
	if diff := cmp.Diff([]float64{16, 18}, run()); diff != "" {
		t.Errorf("after master update (-want +got):\n%s", diff)
	}
	if n, _ := t1.VariableNode("w"); n.Name() != "tower_1/w" {
		t.Errorf("tower 1 node name %q", n.Name())
	}
}

func TestRunAllNamesPanickingTower(t *testing.T) {
	s := towers.NewStore()
	ts := []*towers.Scope{towers.New(0, towers.CPU(0), s, nil), towers.New(1, towers.CPU(1), s, nil)}
	err := towers.RunAll(context.Background(), ts, func(tw *towers.Scope) error {
		if tw.Index() == 1 {
			panic("bad shape")
		}
		return nil
	})
	var pe *towers.PanicError
	if !errors.As(err, &pe) || pe.Tower != "tower 1 (/device:CPU:1)" || !strings.Contains(err.Error(), "bad shape") {
		t.Fatalf("got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := towers.RunAll(ctx, ts, func(*towers.Scope) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}
}

func TestSumGradients(t *testing.T) {
	dst := []float64{9, 9}
	if err := towers.SumGradients(dst, []any{[]float64{1, 2}, nil, []float64{3, 4}}, []float64{1, 5, 0.5}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float64{2.5, 4}, dst); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := towers.SumGradients(dst, []any{[]float32{1, 2}}, []float64{1}); err == nil || !strings.Contains(err.Error(), "tower 0") {
		t.Errorf("dtype mismatch: %v", err)
	}
}

func TestSetBLASThreads(t *testing.T) {
	name, before := towers.BLAS()
	t.Cleanup(func() { _ = towers.SetBLASThreads(before) })
	if before != 1 {
		t.Errorf("%s: starts with %d threads a call, want 1", name, before)
	}
	for _, c := range []struct {
		n       int
		wantErr bool
	}{
		{n: 0, wantErr: true},
		{n: -1, wantErr: true},
		{n: 2, wantErr: false},
		{n: 1, wantErr: false},
	} {
		err := towers.SetBLASThreads(c.n)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: SetBLASThreads(%d) = %v, want error %t", name, c.n, err, c.wantErr)
		}
		if err == nil {
			if _, got := towers.BLAS(); got != c.n {
				t.Errorf("%s: after SetBLASThreads(%d), BLAS() threads = %d", name, c.n, got)
			}
		}
	}
}
