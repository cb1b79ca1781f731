package export_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

var quiet = slog.New(slog.DiscardHandler)

var servingX = estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}

// train trains fn (replicated over n CPU towers) a few steps on the linreg
// data in a fresh model directory.
func train(t testing.TB, fn model.Fn, n int, steps int64) *estimator.Estimator {
	t.Helper()
	mdl := replicate.ModelFn(fn,
		replicate.Config{Devices: towers.CPUs(n), Optimizer: optimizers.SGD(0.5), Reduction: replicate.BatchMean})
	est, err := estimator.New(mdl, estimator.RunConfig{ModelDir: t.TempDir(), Seed: 1, LogEvery: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { est.Close() })
	features, labels := linreg.Data(200, 1)
	in, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 50, Epochs: estimator.Forever, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := est.Train(context.Background(), in, estimator.Steps(steps)); err != nil {
		t.Fatal(err)
	}
	return est
}

// exportLinreg trains linreg.Model 5 steps on two towers and exports it.
func exportLinreg(t testing.TB) (*estimator.Estimator, string) {
	t.Helper()
	est := train(t, linreg.Model, 2, 5)
	dir, err := est.Export(context.Background(), t.TempDir(), servingX)
	if err != nil {
		t.Fatal(err)
	}
	return est, dir
}

// batches returns feature batches of x with the given row counts.
func batches(sizes ...int) []map[string]*tensor.Dense {
	var out []map[string]*tensor.Dense
	for i, n := range sizes {
		f, _ := linreg.Data(n, uint64(100+i))
		out = append(out, f)
	}
	return out
}

func inputOf(bs []map[string]*tensor.Dense) estimator.InputFn {
	return func(context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for _, b := range bs {
				if !yield(estimator.Batch{Features: b}, nil) {
					return
				}
			}
		}
	}
}

// plainTensor is a tensor as go-cmp can compare it.
type plainTensor struct {
	Dtype string
	Shape []int
	Data  any
}

func plain(m map[string]*tensor.Dense) map[string]plainTensor {
	out := map[string]plainTensor{}
	for k, v := range m {
		out[k] = plainTensor{v.Dtype().String(), []int(v.Shape().Clone()), v.Data()}
	}
	return out
}

func load(t *testing.T, dir string, mdl *replicate.Model) *export.Predictor {
	t.Helper()
	p, err := export.Load(dir, mdl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestRunMatchesPredict(t *testing.T) {
	ctx := context.Background()
	est, dir := exportLinreg(t)
	bs := batches(1, 2, 3, 5, 8, 13)
	var want []map[string]*tensor.Dense
	for out, err := range est.PredictBatches(ctx, inputOf(bs)) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, out.ExportOutputs[model.DefaultServingSignature])
	}
	for _, tc := range []struct {
		name   string
		towers int // the devices, and so the most towers a batch runs on
	}{
		{"one tower", 1},
		{"replicate 2 devices", 2},
		{"replicate 3 devices", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			built := map[int]bool{}
			record := func(tw *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, params model.Params) (*model.Spec, error) {
				mu.Lock()
				built[tw.Index()] = true
				mu.Unlock()
				return linreg.Model(tw, mode, features, labels, params)
			}
			p := load(t, dir, replicate.ModelFn(record, replicate.Config{Devices: towers.CPUs(tc.towers)}))
			if p.Dir() != dir || p.Version() != 1 || p.Step() != 5 {
				t.Errorf("dir %q version %d step %d, want %q 1 5", p.Dir(), p.Version(), p.Step(), dir)
			}
			for i, b := range bs {
				got, err := p.Run(ctx, model.DefaultServingSignature, b)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(plain(want[i]), plain(got)); diff != "" {
					t.Errorf("batch %d (-predict +run):\n%s", i, diff)
				}
			}
			if len(built) != tc.towers {
				t.Errorf("towers built: %v, want %d", built, tc.towers)
			}
		})
	}
}

func TestRunConcurrently(t *testing.T) {
	ctx := context.Background()
	est, dir := exportLinreg(t)
	p := load(t, dir, replicate.ModelFn(linreg.Model, replicate.Config{Devices: towers.CPUs(2)}))
	bs := batches(1, 2, 3, 4, 5, 6, 7, 8)
	var want []map[string]plainTensor
	for out, err := range est.PredictBatches(ctx, inputOf(bs)) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, plain(out.ExportOutputs[model.DefaultServingSignature]))
	}
	got := make([]map[string]plainTensor, len(bs))
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			out, err := p.Run(ctx, model.DefaultServingSignature, b)
			got[i], errs[i] = plain(out), err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-predict +run):\n%s", diff)
	}
}

// predictionsOnly is linreg.Model without export outputs.
func predictionsOnly(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, p model.Params) (*model.Spec, error) {
	spec, err := linreg.Model(t, mode, features, labels, p)
	if err != nil {
		return nil, err
	}
	spec.ExportOutputs = nil
	return spec, nil
}

func TestDefaultSignatureFromPredictions(t *testing.T) {
	ctx := context.Background()
	est := train(t, predictionsOnly, 1, 3)
	dir, err := est.Export(ctx, t.TempDir(), servingX)
	if err != nil {
		t.Fatal(err)
	}
	p := load(t, dir, replicate.ModelFn(predictionsOnly, replicate.Config{Devices: towers.CPUs(2)}))
	wantSigs := map[string]export.Signature{model.DefaultServingSignature: {
		Method:  "predict",
		Inputs:  map[string]export.TensorInfo{"x": {Dtype: "float64", Shape: []int{-1, 1}}},
		Outputs: map[string]export.TensorInfo{"y": {Dtype: "float64", Shape: []int{-1, 1}}},
	}}
	if diff := cmp.Diff(wantSigs, p.Signatures()); diff != "" {
		t.Errorf("signatures (-want +got):\n%s", diff)
	}
	bs := batches(1, 4, 7)
	i := 0
	for out, err := range est.PredictBatches(ctx, inputOf(bs)) {
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Run(ctx, model.DefaultServingSignature, bs[i])
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(plain(out.Predictions), plain(got)); diff != "" {
			t.Errorf("batch %d (-predict +run):\n%s", i, diff)
		}
		i++
	}
}

func TestSignaturesFile(t *testing.T) {
	_, dir := exportLinreg(t)
	data, err := os.ReadFile(filepath.Join(dir, exportdir.SignaturesFile))
	if err != nil {
		t.Fatal(err)
	}
	var got exportdir.Signatures
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := exportdir.Signatures{Format: exportdir.Format, Step: 5, Signatures: map[string]export.Signature{
		model.DefaultServingSignature: {
			Method:  "regress",
			Inputs:  map[string]export.TensorInfo{"x": {Dtype: "float64", Shape: []int{-1, 1}}},
			Outputs: map[string]export.TensorInfo{"outputs": {Dtype: "float64", Shape: []int{-1, 1}}},
		},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("signatures.json (-want +got):\n%s", diff)
	}
	p := load(t, dir, replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	sigs := p.Signatures()
	if diff := cmp.Diff(want.Signatures, sigs); diff != "" {
		t.Errorf("Signatures() (-want +got):\n%s", diff)
	}
	// The copy is the caller's.
	sigs[model.DefaultServingSignature].Inputs["x"].Shape[0] = 7
	if diff := cmp.Diff(want.Signatures, p.Signatures()); diff != "" {
		t.Errorf("Signatures() after changing a copy (-want +got):\n%s", diff)
	}
}

func TestVersions(t *testing.T) {
	ctx := context.Background()
	est := train(t, linreg.Model, 1, 2)
	base := t.TempDir()
	if _, err := export.LoadLatest(base, replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})); !errors.Is(err, export.ErrNoVersion) {
		t.Errorf("LoadLatest of an empty base: %v, want ErrNoVersion", err)
	}
	if _, err := export.LoadLatest(filepath.Join(base, "nothing"), replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})); !errors.Is(err, export.ErrNoVersion) {
		t.Errorf("LoadLatest of a missing base: %v, want ErrNoVersion", err)
	}
	var dirs []string
	for range 4 {
		if err := est.Train(ctx, trainInput(t), estimator.Steps(1)); err != nil {
			t.Fatal(err)
		}
		dir, err := est.Export(ctx, base, servingX, estimator.KeepVersions(2))
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, filepath.Base(dir))
	}
	if diff := cmp.Diff([]string{"1", "2", "3", "4"}, dirs); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	vs, err := estimator.Versions(base)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{3, 4}, vs); diff != "" {
		t.Errorf("kept versions (-want +got):\n%s", diff)
	}
	p, err := export.LoadLatest(base, replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := [...]any{p.Version(), p.Step(), p.Dir()}; got != [...]any{int64(4), int64(6), filepath.Join(base, "4")} {
		t.Errorf("latest: version, step, dir = %v, want 4, 6, %s", got, filepath.Join(base, "4"))
	}
	p3 := load(t, filepath.Join(base, "3"), replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	if p3.Version() != 3 || p3.Step() != 5 {
		t.Errorf("version 3: version %d step %d, want 3 5", p3.Version(), p3.Step())
	}
}

func trainInput(t *testing.T) estimator.InputFn {
	features, labels := linreg.Data(200, 2)
	in, err := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 50, Epochs: estimator.Forever})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// copyVersion copies the version directory src to <temp>/<name>.
func copyVersion(t *testing.T, src, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// variableFile returns the path of the named variable's file under dir
// (the checkpoint format names it <index>-<name>.npy).
func variableFile(t *testing.T, dir, name string) string {
	t.Helper()
	var found string
	err := filepath.WalkDir(filepath.Join(dir, exportdir.VariablesDir), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), "-"+name+".npy") {
			found = p
		}
		return err
	})
	if err != nil || found == "" {
		t.Fatalf("no file for variable %q under %s (%v)", name, dir, err)
	}
	return found
}

// matrixW is linreg's model with w a 1×1 matrix instead of a scalar.
func matrixW(t *towers.Scope, mode model.Mode, features model.Features, _ model.Labels, _ model.Params) (*model.Spec, error) {
	w := t.MustVariable("w", tensor.Float64, tensor.Shape{1, 1}, towers.Zeros())
	b := t.MustVariable("b", tensor.Float64, nil, towers.Zeros())
	pred := G.Must(G.Add(G.Must(G.Mul(features["x"], w)), b))
	return &model.Spec{
		Predictions:   map[string]*G.Node{"y": pred},
		ExportOutputs: map[string]model.ExportOutput{model.DefaultServingSignature: model.RegressionOutput{Value: pred}},
	}, nil
}

// extraVariable is linreg's model with one more variable.
func extraVariable(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, p model.Params) (*model.Spec, error) {
	spec, err := linreg.Model(t, mode, features, labels, p)
	if err != nil {
		return nil, err
	}
	scale := t.MustVariable("scale", tensor.Float64, nil, towers.Constant(1))
	pred := G.Must(G.Mul(spec.Predictions["y"], scale))
	spec.Predictions["y"] = pred
	spec.ExportOutputs[model.DefaultServingSignature] = model.RegressionOutput{Value: pred}
	return spec, nil
}

// noBias is linreg's model without b.
func noBias(t *towers.Scope, mode model.Mode, features model.Features, _ model.Labels, _ model.Params) (*model.Spec, error) {
	w := t.MustVariable("w", tensor.Float64, nil, towers.Zeros())
	pred := G.Must(G.Mul(features["x"], w))
	return &model.Spec{
		Predictions:   map[string]*G.Node{"y": pred},
		ExportOutputs: map[string]model.ExportOutput{model.DefaultServingSignature: model.RegressionOutput{Value: pred}},
	}, nil
}

// wideOutput is linreg's model serving its value twice per example.
func wideOutput(t *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, p model.Params) (*model.Spec, error) {
	spec, err := linreg.Model(t, mode, features, labels, p)
	if err != nil {
		return nil, err
	}
	pred := G.Must(G.Concat(1, spec.Predictions["y"], spec.Predictions["y"]))
	spec.ExportOutputs[model.DefaultServingSignature] = model.RegressionOutput{Value: pred}
	return spec, nil
}

func TestLoadErrors(t *testing.T) {
	_, src := exportLinreg(t)
	flip := func(path string) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)-1] ^= 0x01
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	linear := replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	for _, tc := range []struct {
		name     string
		dirName  string
		change   func(t *testing.T, dir string)
		model    *replicate.Model
		nilModel bool
		want     []string // substrings of the error
	}{
		{
			name:   "corrupted variable file",
			change: func(t *testing.T, dir string) { flip(variableFile(t, dir, "w")) },
			want:   []string{"w.npy", "corrupted"},
		},
		{
			name:   "corrupted signatures",
			change: func(t *testing.T, dir string) { flip(filepath.Join(dir, exportdir.SignaturesFile)) },
			want:   []string{exportdir.SignaturesFile, "corrupted"},
		},
		{
			name: "truncated variable file",
			change: func(t *testing.T, dir string) {
				p := variableFile(t, dir, "b")
				data, _ := os.ReadFile(p)
				if err := os.WriteFile(p, data[:len(data)-3], 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"b.npy", "bytes, the manifest says"},
		},
		{
			name:   "missing file",
			change: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, exportdir.SignaturesFile)) },
			want:   []string{exportdir.SignaturesFile, "missing"},
		},
		{
			name:   "missing variable file",
			change: func(t *testing.T, dir string) { os.Remove(variableFile(t, dir, "w")) },
			want:   []string{"w.npy", "missing"},
		},
		{
			name: "extra file",
			change: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, exportdir.VariablesDir, "stray.npy"), []byte("x"), 0o644)
			},
			want: []string{"stray.npy", "not in the manifest"},
		},
		{
			name:   "missing manifest",
			change: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, exportdir.ManifestFile)) },
			want:   []string{exportdir.ManifestFile, "missing"},
		},
		{
			name:  "variable shape differs",
			model: replicate.ModelFn(matrixW, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
			want:  []string{`variable "w"`, "shape [1 1] dtype float64 in the model but shape [] dtype float64 in checkpoint"},
		},
		{
			name:  "model has an extra variable",
			model: replicate.ModelFn(extraVariable, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
			want:  []string{"lacks the model's variables", `"scale"`},
		},
		{
			name:  "export has a variable the model lacks",
			model: replicate.ModelFn(noBias, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
			want:  []string{`variables the model does not make: ["b"]`},
		},
		{
			name:  "model without export outputs",
			model: replicate.ModelFn(predictionsOnly, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
			want:  []string{`output "y"`},
		},
		{
			name:  "output shape differs",
			model: replicate.ModelFn(wideOutput, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}),
			want:  []string{`output "outputs"`, "shape [-1 2]", "shape [-1 1]"},
		},
		{
			name: "manifest over its cap",
			change: func(t *testing.T, dir string) {
				must(t, os.Truncate(filepath.Join(dir, exportdir.ManifestFile), exportdir.MaxManifestBytes+1))
			},
			want: []string{fmt.Sprintf("%s is over %d bytes: damaged?", exportdir.ManifestFile, exportdir.MaxManifestBytes)},
		},
		{
			name: "signatures over their cap",
			change: func(t *testing.T, dir string) {
				// Listed in the manifest as it is, so that only the
				// cap refuses it.
				must(t, os.Truncate(filepath.Join(dir, exportdir.SignaturesFile), exportdir.MaxSignaturesBytes+1))
				relist(t, dir, exportdir.SignaturesFile)
			},
			want: []string{fmt.Sprintf("%s is over %d bytes: damaged?", exportdir.SignaturesFile, exportdir.MaxSignaturesBytes)},
		},
		{name: "dir not a version number", dirName: "latest", want: []string{`"latest"`, "not a version number"}},
		{name: "version 0", dirName: "0", want: []string{`"0"`, "not a version number"}},
		{name: "negative version", dirName: "-3", want: []string{`"-3"`, "not a version number"}},
		{name: "no devices", model: replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{}}), want: []string{"no devices"}},
		{name: "repeated device", model: replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(0)}}), want: []string{"listed twice"}},
		{name: "nil model", nilModel: true, want: []string{"nil model"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.dirName
			if name == "" {
				name = "1"
			}
			dir := copyVersion(t, src, name)
			if tc.change != nil {
				tc.change(t, dir)
			}
			mdl := tc.model
			if mdl == nil && !tc.nilModel {
				mdl = linear
			}
			p, err := export.Load(dir, mdl)
			if err == nil {
				p.Close()
				t.Fatalf("Load succeeded, want an error with %q", tc.want)
			}
			t.Log(err)
			wanterr.Mentions(t, err, tc.want...)
		})
	}
	// The untouched copy loads.
	load(t, copyVersion(t, src, "7"), linear)
}

func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	_, dir := exportLinreg(t)
	p := load(t, dir, replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}}))
	x := func(shape ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float64))
	}
	sig := model.DefaultServingSignature
	for _, tc := range []struct {
		name      string
		signature string
		features  map[string]*tensor.Dense
		is        error
		want      []string
	}{
		{"missing input", sig, map[string]*tensor.Dense{}, export.ErrBadInput, []string{`missing input "x"`, "float64", "[-1 1]"}},
		{"extra input", sig, map[string]*tensor.Dense{"x": x(2, 1), "z": x(2, 1)}, export.ErrBadInput, []string{`unexpected input "z"`}},
		{"wrong dtype", sig, map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(2, 1), tensor.Of(tensor.Float32))}, export.ErrBadInput,
			[]string{`input "x"`, "dtype float32", "want dtype float64 shape [-1 1]"}},
		{"wrong shape", sig, map[string]*tensor.Dense{"x": x(2, 2)}, export.ErrBadInput, []string{`input "x" has shape [2 2]`, "[-1 1]"}},
		{"no batch dimension", sig, map[string]*tensor.Dense{"x": x(2)}, export.ErrBadInput, []string{`input "x" has shape [2]`, "[-1 1]"}},
		{"nil tensor", sig, map[string]*tensor.Dense{"x": nil}, export.ErrBadInput, []string{`input "x" is nil`}},
		{"unknown signature", "classify", map[string]*tensor.Dense{"x": x(2, 1)}, export.ErrUnknownSignature, []string{`"classify"`, sig}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Run(ctx, tc.signature, tc.features)
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.is)
			}
			t.Log(err)
			wanterr.Mentions(t, err, tc.want...)
		})
	}
	if _, err := p.Run(ctx, sig, map[string]*tensor.Dense{"x": x(3, 1)}); err != nil {
		t.Errorf("a good request after bad ones: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Run(cctx, sig, map[string]*tensor.Dense{"x": x(3, 1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v, want context.Canceled", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(ctx, sig, map[string]*tensor.Dense{"x": x(3, 1)}); !errors.Is(err, export.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// relist updates the manifest entry of dir's file rel to its content.
func relist(t *testing.T, dir, rel string) {
	t.Helper()
	mpath := filepath.Join(dir, exportdir.ManifestFile)
	data, err := os.ReadFile(mpath)
	must(t, err)
	var m exportdir.Manifest
	must(t, json.Unmarshal(data, &m))
	f, err := os.Open(filepath.Join(dir, rel))
	must(t, err)
	defer f.Close()
	sum, n, err := exportdir.Sum(f)
	must(t, err)
	for i := range m.Files {
		if m.Files[i].Path == rel {
			m.Files[i].SHA256, m.Files[i].Bytes = sum, n
		}
	}
	data, err = json.Marshal(m)
	must(t, err)
	must(t, os.WriteFile(mpath, data, 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
