package towers_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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

func TestParseDevices(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []towers.Device
		err   []string
	}{
		{names: []string{"/cpu:0", "/device:CPU:1", "/GPU:2"}, want: []towers.Device{towers.CPU(0), towers.CPU(1), towers.GPU(2)}},
		{names: nil, want: []towers.Device{}},
		{names: []string{"/cpu:0", "/tpu:0"}, err: []string{`"/tpu:0"`, "unknown device type"}},
		{names: []string{"/cpu:x"}, err: []string{`"/cpu:x"`, "index"}},
	} {
		t.Run(strings.Join(tc.names, ","), func(t *testing.T) {
			got, err := towers.ParseDevices(tc.names...)
			if tc.err != nil {
				wanterr.Mentions(t, err, tc.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
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

func TestCPUs(t *testing.T) {
	tests := []struct {
		n    int
		want []towers.Device
	}{
		{0, []towers.Device{}},
		{1, []towers.Device{towers.CPU(0)}},
		{3, []towers.Device{towers.CPU(0), towers.CPU(1), towers.CPU(2)}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, towers.CPUs(tc.n)); diff != "" {
			t.Errorf("CPUs(%d) (-want +got):\n%s", tc.n, diff)
		}
	}
}

func TestStoreGetOrCreate(t *testing.T) {
	s := towers.NewStore(towers.StoreConfig{Seed: 3})
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
	s1, s2 := towers.NewStore(towers.StoreConfig{Seed: 5}), towers.NewStore(towers.StoreConfig{Seed: 5})
	a1, _, _ := s1.GetOrCreate(spec("a"))
	_, _, _ = s1.GetOrCreate(spec("b"))
	_, _, _ = s2.GetOrCreate(spec("b"))
	a2, _, _ := s2.GetOrCreate(spec("a"))
	if diff := cmp.Diff(a1.Data(), a2.Data()); diff != "" {
		t.Errorf("same seed and name, other order (-first +second):\n%s", diff)
	}
	s3 := towers.NewStore(towers.StoreConfig{Seed: 6})
	a3, _, _ := s3.GetOrCreate(spec("a"))
	if cmp.Equal(a1.Data(), a3.Data()) {
		t.Errorf("seeds 5 and 6 gave the same values %v", a1.Data())
	}
}

// TestPlacement: the placement places the variables model code creates
// through a scope, counting those only; the global step and optimizer
// slots not colocated with a variable stay on the parameter server, and a
// colocated slot goes with its variable.
func TestPlacement(t *testing.T) {
	d0, d1, d3 := towers.GPU(0), towers.GPU(1), towers.GPU(3)
	tests := []struct {
		name string
		cfg  towers.StoreConfig
		want map[string]towers.Device
	}{
		{"default: everything on CPU:0", towers.StoreConfig{},
			map[string]towers.Device{"global_step": towers.CPU(0), "a": towers.CPU(0), "b": towers.CPU(0), "c": towers.CPU(0), "d": towers.CPU(0), "iterations": towers.CPU(0), "b/slot": towers.CPU(0)}},
		{"parameter server", towers.StoreConfig{ParameterServer: towers.GPU(0)},
			map[string]towers.Device{"global_step": d0, "a": d0, "b": d0, "c": d0, "d": d0, "iterations": d0, "b/slot": d0}},
		{"round robin counts model variables only", towers.StoreConfig{Placement: towers.RoundRobin(d0, d1, d3)},
			map[string]towers.Device{"global_step": towers.CPU(0), "a": d0, "b": d1, "c": d3, "d": d0, "iterations": towers.CPU(0), "b/slot": d1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := towers.NewStore(tc.cfg)
			scope := towers.NewScope(0, 1, towers.CPU(0), s, nil)
			if _, _, err := s.GetOrCreate(towers.VarSpec{Name: "global_step", Dtype: tensor.Int64}); err != nil {
				t.Fatal(err)
			}
			for i, n := range []string{"a", "b", "c", "d"} {
				if _, err := scope.Variable(n, tensor.Float64, nil, nil); err != nil {
					t.Fatal(err)
				}
				if i == 1 { // optimizer state created between model variables
					for _, spec := range []towers.VarSpec{{Name: "iterations", Dtype: tensor.Int64}, {Name: "b/slot", Dtype: tensor.Float64, Colocate: "b"}} {
						if _, _, err := s.GetOrCreate(spec); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			got := map[string]towers.Device{}
			for _, n := range s.Names() {
				d, err := s.Device(n)
				if err != nil {
					t.Fatal(err)
				}
				got[n] = d
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
		})
	}
}

func weightsStore(t *testing.T) *towers.Store {
	t.Helper()
	s := towers.NewStore(towers.StoreConfig{})
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

func TestSetBLASThreads(t *testing.T) {
	name, before := towers.BLAS()
	t.Cleanup(func() { _ = towers.SetBLASThreads(before) })
	if before != 1 {
		t.Errorf("%s: starts with %d threads a call, want 1", name, before)
	}
	// OpenBLAS's name says whose kernels it runs: the CPU it detected or
	// OPENBLAS_CORETYPE names.
	if name != "gonum" && !regexp.MustCompile(`^OpenBLAS \(\w+ kernels\)$`).MatchString(name) {
		t.Errorf("BLAS() = %q, want gonum or OpenBLAS (CPU kernels)", name)
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

// TestHeNormal: He initialization's standard deviation is √(2/fanIn), fanIn
// the input width of a dense kernel and C·KH·KW of a convolution kernel.
func TestHeNormal(t *testing.T) {
	tests := []struct {
		shape tensor.Shape
		fanIn int
	}{
		{tensor.Shape{200, 300}, 200},
		{tensor.Shape{64, 16, 3, 3}, 144},
	}
	for _, tc := range tests {
		vals := make([]float64, tc.shape.TotalSize())
		if err := towers.HeNormal()(rand.New(rand.NewPCG(1, 2)), tensor.Float64, tc.shape, vals); err != nil {
			t.Fatal(err)
		}
		var ss float64
		for _, v := range vals {
			ss += v * v
		}
		got := math.Sqrt(ss / float64(len(vals)))
		want := math.Sqrt(2 / float64(tc.fanIn))
		if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0.03, 0)); diff != "" {
			t.Errorf("shape %v: standard deviation (-want +got):\n%s", tc.shape, diff)
		}
	}
}

// TestGlorotUniform: Glorot's limit is √(6/(fanIn+fanOut)), the fans of a
// dense kernel (in, units) and of a convolution kernel (F, C, KH, KW)
// C·KH·KW and F·KH·KW; a uniform draw's standard deviation is limit/√3.
func TestGlorotUniform(t *testing.T) {
	tests := []struct {
		shape         tensor.Shape
		fanIn, fanOut int
	}{
		{tensor.Shape{200, 300}, 200, 300},
		{tensor.Shape{64, 32, 5, 5}, 800, 1600},
		{tensor.Shape{16, 3, 3, 3}, 27, 144},
	}
	for _, tc := range tests {
		vals := make([]float64, tc.shape.TotalSize())
		if err := towers.GlorotUniform()(rand.New(rand.NewPCG(1, 2)), tensor.Float64, tc.shape, vals); err != nil {
			t.Fatal(err)
		}
		var ss, peak float64
		for _, v := range vals {
			ss += v * v
			peak = max(peak, math.Abs(v))
		}
		limit := math.Sqrt(6 / float64(tc.fanIn+tc.fanOut))
		got := [2]float64{math.Sqrt(ss / float64(len(vals))), peak}
		want := [2]float64{limit / math.Sqrt(3), limit}
		if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0.05, 0)); diff != "" {
			t.Errorf("shape %v: standard deviation and largest magnitude (-want +got):\n%s", tc.shape, diff)
		}
	}
}

// TestInitializersFillInPlace: the drawing initializers write a float32
// or float64 variable's values straight into its memory, allocating less
// than its size, and a float32 variable gets the float64 variable's
// values, rounded.
func TestInitializersFillInPlace(t *testing.T) {
	const n = 1 << 16
	shape := tensor.Shape{n / 16, 16}
	for _, c := range []struct {
		name string
		init towers.Initializer
	}{
		{"Constant", towers.Constant(0.1)},
		{"RandomNormal", towers.RandomNormal(0, 1)},
		{"RandomUniform", towers.RandomUniform(-1, 1)},
		{"GlorotUniform", towers.GlorotUniform()},
		{"HeNormal", towers.HeNormal()},
	} {
		t.Run(c.name, func(t *testing.T) {
			f64 := make([]float64, n)
			if err := c.init(rand.New(rand.NewPCG(1, 2)), tensor.Float64, shape, f64); err != nil {
				t.Fatal(err)
			}
			f32 := make([]float32, n)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := c.init(rand.New(rand.NewPCG(1, 2)), tensor.Float32, shape, f32)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if b := after.TotalAlloc - before.TotalAlloc; b >= n*4 {
				t.Errorf("filling %d float32s allocated %d bytes, want less than the variable's %d", n, b, n*4)
			}
			want := make([]float32, n)
			for i, v := range f64 {
				want[i] = float32(v)
			}
			if diff := cmp.Diff(want, f32); diff != "" {
				t.Errorf("float32 values are not the float64 ones rounded (-want +got):\n%s", diff)
			}
		})
	}
	if err := towers.RandomNormal(0, 1)(rand.New(rand.NewPCG(1, 2)), tensor.Int, tensor.Shape{2}, []int{0, 0}); err == nil {
		t.Error("RandomNormal of an int variable: nil error, want one")
	}
}
