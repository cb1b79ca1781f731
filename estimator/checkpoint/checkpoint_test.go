package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// varDef describes a test variable.
type varDef struct {
	name      string
	dt        tensor.Dtype
	shape     []int
	trainable bool
}

// testVars has float32, float64 and int64 variables of rank 0 to 3, an
// optimizer slot and the global step.
var testVars = []varDef{
	{"dense/w", tensor.Float32, []int{3, 4}, true},
	{"dense/b", tensor.Float32, []int{4}, true},
	{"scale", tensor.Float64, []int{}, true},
	{"conv/k", tensor.Float64, []int{2, 3, 2}, true},
	{"dense/w/Adam/m", tensor.Float32, []int{3, 4}, false},
	{"Adam/iterations", tensor.Int64, []int{}, false},
	{"counts", tensor.Int64, []int{2, 2, 2}, false},
	{"ids", tensor.Int, []int{3}, false},
	{"mask", tensor.Bool, []int{5}, false},
	{"bytes", tensor.Uint8, []int{2, 2}, false},
	{"small", tensor.Int32, []int{1, 1, 1}, false},
	{"global_step", tensor.Int64, []int{}, false},
}

// values returns n deterministic values of dt that depend on seed.
func values(dt tensor.Dtype, n int, seed int64) any {
	out := numeric.NewSlice(dt, n)
	for i := range n {
		x := (seed*131 + int64(i)*17) % 1009
		switch s := out.(type) {
		case []float32:
			s[i] = float32(x)*0.25 - 100
		case []float64:
			s[i] = float64(x)*0.125 - 50
		case []int64:
			s[i] = x*1_000_000_007 - 5
		case []int:
			s[i] = int(x) - 500
		case []int32:
			s[i] = int32(x) - 7
		case []uint8:
			s[i] = uint8(x)
		case []bool:
			s[i] = x%3 == 0
		default:
			panic(fmt.Sprintf("values: %T", out))
		}
	}
	return out
}

func size(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// newStore returns a store holding defs with values(seed).
func newStore(t testing.TB, defs []varDef, seed int64) *towers.Store {
	t.Helper()
	s := towers.NewStore(towers.StoreConfig{})
	for i, d := range defs {
		_, _, err := s.GetOrCreate(towers.VarSpec{
			Name: d.name, Dtype: d.dt, Shape: tensor.Shape(slices.Clone(d.shape)), Trainable: d.trainable,
			Init: towers.Values(numeric.Over(tensor.Shape(d.shape), values(d.dt, size(d.shape), seed+int64(i)))),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// varState is what a test compares of a store variable.
type varState struct {
	Name      string
	Dtype     string
	Shape     []int
	Trainable bool
	Data      any
}

func snapshot(s *towers.Store) []varState {
	var out []varState
	for _, v := range s.Variables() {
		out = append(out, varState{v.Name(), v.Dtype().String(), append([]int{}, v.Shape()...), v.Trainable(), numeric.Copy(v.Data())})
	}
	return out
}

func TestSaveRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := newStore(t, testVars, 1)
	path, err := Save(dir, src, 42, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "ckpt-42"); path != want {
		t.Errorf("Save returned %q, want %q", path, want)
	}
	want := snapshot(src)

	r, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Step() != 42 || r.Path() != path {
		t.Errorf("Step() = %d, Path() = %q", r.Step(), r.Path())
	}
	if diff := cmp.Diff(src.Names(), r.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	for _, w := range want {
		got, err := r.Tensor(w.Name)
		if err != nil {
			t.Fatal(err)
		}
		data, err := numeric.Slice(got)
		if err != nil {
			t.Fatal(err)
		}
		gs := varState{w.Name, got.Dtype().String(), append([]int{}, got.Shape()...), w.Trainable, data}
		if diff := cmp.Diff(w, gs); diff != "" {
			t.Errorf("Tensor(%q) (-want +got):\n%s", w.Name, diff)
		}
	}
	if _, err := r.Tensor("nope"); !errors.Is(err, towers.ErrNotFound) {
		t.Errorf("Tensor(nope) = %v, want ErrNotFound", err)
	}

	// The manifest lists every variable with its numpy dtype and file.
	m := r.Manifest()
	if m.Format != Format || m.Step != 42 || m.Created.IsZero() {
		t.Errorf("manifest header %q %d %v", m.Format, m.Step, m.Created)
	}
	type brief struct {
		Name, Dtype, File string
		Shape             []int
		Trainable         bool
	}
	var got []brief
	for _, e := range m.Variables {
		got = append(got, brief{e.Name, e.Dtype, e.File, e.Shape, e.Trainable})
		fi, err := os.Stat(filepath.Join(path, e.File))
		if err != nil || fi.Size() != e.Bytes || len(e.SHA256) != 64 {
			t.Errorf("%s: stat %v, bytes %d, sha256 %q", e.Name, err, e.Bytes, e.SHA256)
		}
	}
	wantBrief := []brief{
		{"dense/w", "<f4", "0000-dense~w.npy", []int{3, 4}, true},
		{"dense/b", "<f4", "0001-dense~b.npy", []int{4}, true},
		{"scale", "<f8", "0002-scale.npy", []int{}, true},
		{"conv/k", "<f8", "0003-conv~k.npy", []int{2, 3, 2}, true},
		{"dense/w/Adam/m", "<f4", "0004-dense~w~Adam~m.npy", []int{3, 4}, false},
		{"Adam/iterations", "<i8", "0005-Adam~iterations.npy", []int{}, false},
		{"counts", "<i8", "0006-counts.npy", []int{2, 2, 2}, false},
		{"ids", "<i8", "0007-ids.npy", []int{3}, false},
		{"mask", "|b1", "0008-mask.npy", []int{5}, false},
		{"bytes", "|u1", "0009-bytes.npy", []int{2, 2}, false},
		{"small", "<i4", "0010-small.npy", []int{1, 1, 1}, false},
		{"global_step", "<i8", "0011-global_step.npy", []int{}, false},
	}
	if diff := cmp.Diff(wantBrief, got); diff != "" {
		t.Errorf("manifest entries (-want +got):\n%s", diff)
	}
	// Manifest returns a copy.
	m.Variables[0].Shape[0] = 99
	if r.Manifest().Variables[0].Shape[0] != 3 {
		t.Error("Manifest() shares its shape slices with the reader")
	}

	// A model directory means its latest checkpoint.
	if latest, err := Latest(dir); err != nil || latest != path {
		t.Errorf("Latest = %q, %v; want %q", latest, err, path)
	}
	if r2, err := Read(dir); err != nil || r2.Path() != path {
		t.Errorf("Read(model dir) = %v, %v", r2, err)
	}

	t.Run("restore into an empty store", func(t *testing.T) {
		dst := towers.NewStore(towers.StoreConfig{})
		if err := r.Restore(dst); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, snapshot(dst)); diff != "" {
			t.Errorf("restored store (-want +got):\n%s", diff)
		}
	})
	t.Run("restore into a store holding the variables", func(t *testing.T) {
		dst := newStore(t, testVars, 7)
		if err := r.Restore(dst); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, snapshot(dst)); diff != "" {
			t.Errorf("restored store (-want +got):\n%s", diff)
		}
	})
	t.Run("restore into a store holding some variables", func(t *testing.T) {
		// Weights only, in another order, plus a variable that is not the
		// model's (a slot of an optimizer the checkpoint's run did not
		// use) and that the checkpoint lacks, which stays.
		defs := []varDef{testVars[3], testVars[1], testVars[0], {"extra", tensor.Float32, []int{2}, true}}
		dst := newStore(t, defs, 9)
		extra := snapshot(dst)[3]
		if err := r.Restore(dst); err != nil {
			t.Fatal(err)
		}
		byName := map[string]varState{}
		for _, v := range snapshot(dst) {
			byName[v.Name] = v
		}
		for _, w := range want {
			if diff := cmp.Diff(w, byName[w.Name]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", w.Name, diff)
			}
		}
		if diff := cmp.Diff(extra, byName["extra"]); diff != "" {
			t.Errorf("extra (-want +got):\n%s", diff)
		}
	})
}

func TestRestorePlacesSlotsBesideTheirVariable(t *testing.T) {
	dir := t.TempDir()
	src := newStore(t, testVars, 1)
	if _, err := Save(dir, src, 1, 0); err != nil {
		t.Fatal(err)
	}
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		modelFirst   bool // the model asks for its variables before the restore
		wantW, wantM towers.Device
	}{
		// Round robin over two devices; the model asks for "scale" and
		// then "dense/w", so "dense/w" goes on CPU:1 and its slot with it.
		{"model first", true, towers.CPU(1), towers.CPU(1)},
		// The restore creates both on the parameter server; the model's
		// request then places "dense/w" and moves its slot along.
		{"restore first", false, towers.CPU(1), towers.CPU(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := towers.NewStore(towers.StoreConfig{Placement: towers.RoundRobin(towers.CPU(0), towers.CPU(1)), ParameterServer: towers.CPU(7)})
			scope := towers.NewScope(0, 1, towers.CPU(0), dst, nil)
			ask := func() {
				if _, err := scope.Variable("scale", tensor.Float64, nil, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := scope.Variable("dense/w", tensor.Float32, tensor.Shape{3, 4}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if tc.modelFirst {
				ask()
			}
			if err := r.Restore(dst); err != nil {
				t.Fatal(err)
			}
			if m, _ := dst.Device("dense/w/Adam/m"); !tc.modelFirst && m != towers.CPU(7) {
				t.Errorf("before the model asks, the slot is on %v, want the parameter server", m)
			}
			ask()
			w, _ := dst.Device("dense/w")
			m, _ := dst.Device("dense/w/Adam/m")
			if diff := cmp.Diff([]towers.Device{tc.wantW, tc.wantM}, []towers.Device{w, m}); diff != "" {
				t.Errorf("devices of dense/w and its slot (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRestoreMismatch(t *testing.T) {
	dir := t.TempDir()
	if _, err := Save(dir, newStore(t, testVars, 1), 3, 0); err != nil {
		t.Fatal(err)
	}
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		def     varDef
		wantErr string
	}{
		{"shape", varDef{"dense/b", tensor.Float32, []int{5}, true}, `variable "dense/b" has shape [5] dtype float32 in the model but shape [4] dtype float32 in checkpoint `},
		{"rank", varDef{"dense/b", tensor.Float32, []int{1, 4}, true}, `variable "dense/b" has shape [1 4]`},
		{"dtype", varDef{"scale", tensor.Float32, []int{}, true}, `variable "scale" has shape [] dtype float32 in the model but shape [] dtype float64`},
		{"int is not int64", varDef{"global_step", tensor.Int, []int{}, false}, `variable "global_step" has shape [] dtype int in the model but shape [] dtype int64`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := newStore(t, []varDef{testVars[0], tt.def}, 5)
			before := snapshot(dst)
			err := r.Restore(dst)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Restore = %v, want error containing %q", err, tt.wantErr)
			}
			// Nothing was written or created.
			if diff := cmp.Diff(before, snapshot(dst)); diff != "" {
				t.Errorf("store changed by a failed restore (-before +after):\n%s", diff)
			}
		})
	}
}

func TestSaveErrors(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, testVars[:2], 1)
	for _, tt := range []struct {
		store   *towers.Store
		step    int64
		keep    int
		wantErr string
	}{
		{nil, 1, 0, "nil store"},
		{s, -1, 0, "negative step"},
		{s, 1, -1, "negative keep"},
	} {
		if _, err := Save(dir, tt.store, tt.step, tt.keep); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Save(step %d keep %d) = %v, want error containing %q", tt.step, tt.keep, err, tt.wantErr)
		}
	}
	c := towers.NewStore(towers.StoreConfig{})
	if _, _, err := c.GetOrCreate(towers.VarSpec{Name: "z", Dtype: tensor.Complex128}); err != nil {
		t.Fatal(err)
	}
	if _, err := Save(dir, c, 1, 0); err == nil || !strings.Contains(err.Error(), `variable "z"`) {
		t.Errorf("Save of a complex variable = %v", err)
	}
	// The failed save left nothing behind but the directory.
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Errorf("failed saves left %v", names(des))
	}
}

func names(des []os.DirEntry) []string {
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	slices.Sort(out)
	return out
}

func readPointerFile(t *testing.T, dir string) pointer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, PointerFile))
	if err != nil {
		t.Fatal(err)
	}
	var p pointer
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKeepLastK(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, testVars, 1)
	for step := int64(1); step <= 5; step++ {
		if _, err := Save(dir, s, step, 2); err != nil {
			t.Fatal(err)
		}
	}
	des, _ := os.ReadDir(dir)
	if diff := cmp.Diff([]string{"checkpoint", "ckpt-4", "ckpt-5"}, names(des)); diff != "" {
		t.Errorf("model dir (-want +got):\n%s", diff)
	}
	want := pointer{Format: Format, Latest: "ckpt-5", Checkpoints: []string{"ckpt-4", "ckpt-5"}}
	if diff := cmp.Diff(want, readPointerFile(t, dir)); diff != "" {
		t.Errorf("pointer (-want +got):\n%s", diff)
	}

	// keep 0 keeps everything from now on.
	for step := int64(6); step <= 7; step++ {
		if _, err := Save(dir, s, step, 0); err != nil {
			t.Fatal(err)
		}
	}
	want = pointer{Format: Format, Latest: "ckpt-7", Checkpoints: []string{"ckpt-4", "ckpt-5", "ckpt-6", "ckpt-7"}}
	if diff := cmp.Diff(want, readPointerFile(t, dir)); diff != "" {
		t.Errorf("pointer (-want +got):\n%s", diff)
	}
	// Oldest means saved first: re-saving step 4 makes it the latest.
	if _, err := Save(dir, s, 4, 3); err != nil {
		t.Fatal(err)
	}
	want = pointer{Format: Format, Latest: "ckpt-4", Checkpoints: []string{"ckpt-6", "ckpt-7", "ckpt-4"}}
	if diff := cmp.Diff(want, readPointerFile(t, dir)); diff != "" {
		t.Errorf("pointer (-want +got):\n%s", diff)
	}
	des, _ = os.ReadDir(dir)
	if diff := cmp.Diff([]string{"checkpoint", "ckpt-4", "ckpt-6", "ckpt-7"}, names(des)); diff != "" {
		t.Errorf("model dir (-want +got):\n%s", diff)
	}
}

func TestSaveSameStepReplaces(t *testing.T) {
	dir := t.TempDir()
	a, b := newStore(t, testVars, 1), newStore(t, testVars, 2)
	if _, err := Save(dir, a, 10, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Save(dir, b, 10, 0); err != nil {
		t.Fatal(err)
	}
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := towers.NewStore(towers.StoreConfig{})
	if err := r.Restore(got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot(b), snapshot(got)); diff != "" {
		t.Errorf("second save of step 10 did not win (-want +got):\n%s", diff)
	}
	des, _ := os.ReadDir(dir)
	if diff := cmp.Diff([]string{"checkpoint", "ckpt-10"}, names(des)); diff != "" {
		t.Errorf("model dir (-want +got):\n%s", diff)
	}
	want := pointer{Format: Format, Latest: "ckpt-10", Checkpoints: []string{"ckpt-10"}}
	if diff := cmp.Diff(want, readPointerFile(t, dir)); diff != "" {
		t.Errorf("pointer (-want +got):\n%s", diff)
	}
}

// TestInterruptedSave recreates what a Save killed at its various stages
// leaves behind and checks readers ignore it and the next Save cleans up.
func TestInterruptedSave(t *testing.T) {
	dir := t.TempDir()
	s1, s2 := newStore(t, testVars, 1), newStore(t, testVars, 2)
	if _, err := Save(dir, s1, 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Save(dir, s2, 2, 0); err != nil {
		t.Fatal(err)
	}
	// A half-written checkpoint of step 3, a stray pointer temp file, and
	// step 2 moved aside by a replacement that never arrived.
	tmp := filepath.Join(dir, ".tmp-ckpt-3-123")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "0000-dense~w.npy"), []byte("\x93NUMPY"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".checkpoint-99.tmp"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	aside := filepath.Join(dir, ".old-ckpt-2-456")
	if err := os.Rename(filepath.Join(dir, "ckpt-2"), aside); err != nil {
		t.Fatal(err)
	}
	if got, err := Latest(dir); err != nil || got != aside {
		t.Errorf("Latest = %q, %v; want the aside copy %q", got, err, aside)
	}
	if r, err := Read(aside); err != nil || r.Step() != 2 {
		t.Errorf("Read(aside) = %v, %v", r, err)
	}

	// The next save moves step 2 back and removes the leftovers.
	if _, err := Save(dir, s1, 4, 0); err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(dir)
	if diff := cmp.Diff([]string{"checkpoint", "ckpt-1", "ckpt-2", "ckpt-4"}, names(des)); diff != "" {
		t.Errorf("model dir (-want +got):\n%s", diff)
	}
	r, err := Read(filepath.Join(dir, "ckpt-2"))
	if err != nil {
		t.Fatal(err)
	}
	got := towers.NewStore(towers.StoreConfig{})
	if err := r.Restore(got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot(s2), snapshot(got)); diff != "" {
		t.Errorf("ckpt-2 after recovery (-want +got):\n%s", diff)
	}
}

// corruptions damage a saved checkpoint; each returns the file the error
// must name.
var corruptions = []struct {
	name    string
	damage  func(t *testing.T, ckpt string) string
	wantErr string
}{
	{"truncated npy", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, "0003-conv~k.npy")
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		must(t, os.Truncate(p, fi.Size()-3))
		return p
	}, "is truncated"},
	{"npy cut in its header", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, "0000-dense~w.npy")
		must(t, os.Truncate(p, 20))
		return p
	}, "is truncated"},
	{"npy with extra bytes", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, "0001-dense~b.npy")
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		must(t, err)
		_, err = f.Write([]byte{0})
		must(t, err)
		must(t, f.Close())
		return p
	}, "has extra bytes"},
	{"flipped byte in npy data", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, "0004-dense~w~Adam~m.npy")
		flip(t, p, -5)
		return p
	}, "sha256"},
	{"flipped byte in npy header", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, "0002-scale.npy")
		flip(t, p, 20)
		return p
	}, "0002-scale.npy"},
	{"shape changed in npy header", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, "0000-dense~w.npy")
		b, err := os.ReadFile(p)
		must(t, err)
		must(t, os.WriteFile(p, bytes.Replace(b, []byte("(3, 4)"), []byte("(4, 3)"), 1), 0o644))
		return p
	}, "the manifest says dtype <f4 shape [3 4]"},
	{"missing variable file", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, "0011-global_step.npy")
		must(t, os.Remove(p))
		return p
	}, "variable file is missing"},
	{"missing manifest", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, ManifestFile)
		must(t, os.Remove(p))
		return p
	}, "manifest is missing"},
	{"truncated manifest", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, ManifestFile)
		fi, err := os.Stat(p)
		must(t, err)
		must(t, os.Truncate(p, fi.Size()/2))
		return p
	}, "bad manifest"},
	{"garbage manifest", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, ManifestFile)
		must(t, os.WriteFile(p, []byte("\x00\x01garbage"), 0o644))
		return p
	}, "bad manifest"},
	{"manifest with a changed value", func(t *testing.T, ckpt string) string {
		// Still valid JSON: only the checksum notices.
		p := filepath.Join(ckpt, ManifestFile)
		b, err := os.ReadFile(p)
		must(t, err)
		must(t, os.WriteFile(p, bytes.Replace(b, []byte(`"trainable": true`), []byte(`"trainable": false`), 1), 0o644))
		return p
	}, "manifest is corrupted"},
	{"manifest of another format", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, ManifestFile)
		b, err := os.ReadFile(p)
		must(t, err)
		must(t, os.WriteFile(p, bytes.Replace(b, []byte(Format), []byte("towerflow-checkpoint-v0"), 1), 0o644))
		return p
	}, `format "towerflow-checkpoint-v0"`},
	{"manifest naming a file outside the checkpoint", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, ManifestFile)
		rewriteManifest(t, p, func(m *Manifest) { m.Variables[1].File = "../ckpt-1/0001-dense~b.npy" })
		return p
	}, "bad or repeated file name"},
	{"manifest listing a name twice", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, ManifestFile)
		rewriteManifest(t, p, func(m *Manifest) { m.Variables[1].Name = m.Variables[0].Name })
		return p
	}, "listed twice"},
	{"manifest of another step than its directory", func(t *testing.T, ckpt string) string {
		p := filepath.Join(ckpt, ManifestFile)
		rewriteManifest(t, p, func(m *Manifest) { m.Step = 0 })
		return p
	}, "its directory's name says step"},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// flip inverts the byte at off (from the end when negative).
func flip(t *testing.T, p string, off int) {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0xff
	must(t, os.WriteFile(p, b, 0o644))
}

// rewriteManifest edits a manifest and gives it a valid checksum again, as a
// buggy writer would.
func rewriteManifest(t *testing.T, p string, edit func(*Manifest)) {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	var mf manifestFile
	must(t, json.Unmarshal(b, &mf))
	edit(&mf.Manifest)
	mf.Checksum, err = mf.Manifest.checksum()
	must(t, err)
	b, err = json.Marshal(mf)
	must(t, err)
	must(t, os.WriteFile(p, b, 0o644))
}

func TestCorruption(t *testing.T) {
	for _, tt := range corruptions {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, testVars, 1)
			for step := int64(1); step <= 3; step++ {
				if _, err := Save(dir, s, step, 0); err != nil {
					t.Fatal(err)
				}
			}
			ckpt := filepath.Join(dir, "ckpt-3")
			file := tt.damage(t, ckpt)

			_, err := Read(ckpt)
			if err == nil {
				t.Fatal("Read of a damaged checkpoint succeeded")
			}
			t.Logf("Read: %v", err)
			if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Read error %q does not name %s and contain %q", err, file, tt.wantErr)
			}

			// Latest skips it.
			got, err := Latest(dir)
			if want := filepath.Join(dir, "ckpt-2"); err != nil || got != want {
				t.Errorf("Latest = %q, %v; want %q", got, err, want)
			}
			// Read of the model directory does the same, and says what
			// it skipped.
			r, err := Read(dir)
			if err != nil || r.Step() != 2 {
				t.Fatalf("Read(model dir) = %v, %v; want step 2", r, err)
			}
			if l := strings.Join(r.Skipped(), "\n"); !strings.Contains(l, "skipped damaged checkpoint") || !strings.Contains(l, file) {
				t.Errorf("Read skipped %q, want a note naming %s", l, file)
			}
		})
	}
}

func TestTensorReverifies(t *testing.T) {
	dir := t.TempDir()
	ckpt, err := Save(dir, newStore(t, testVars, 1), 1, 0)
	must(t, err)
	r, err := Read(ckpt)
	must(t, err)
	p := filepath.Join(ckpt, "0000-dense~w.npy")
	flip(t, p, -1)
	if _, err := r.Tensor("dense/w"); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Tensor of a file corrupted after Read = %v, want an error naming %s", err, p)
	}
	if err := r.Restore(towers.NewStore(towers.StoreConfig{})); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Restore of a file corrupted after Read = %v, want an error naming %s", err, p)
	}
}

func TestLatestFallback(t *testing.T) {
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		s := newStore(t, testVars[:3], 1)
		for step := int64(1); step <= 3; step++ {
			if _, err := Save(dir, s, step, 0); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	tests := []struct {
		name     string
		damage   func(t *testing.T, dir string)
		want     string // checkpoint name, "" for an error
		is       error  // the error when want is ""
		wantLogs []string
	}{
		{"whole", func(*testing.T, string) {}, "ckpt-3", nil, nil},
		{"two newest damaged", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, "ckpt-3", "0000-dense~w.npy"), -1)
			must(t, os.Remove(filepath.Join(dir, "ckpt-2", ManifestFile)))
		}, "ckpt-1", nil, []string{"ckpt-3", "ckpt-2"}},
		{"newest missing", func(t *testing.T, dir string) {
			must(t, os.RemoveAll(filepath.Join(dir, "ckpt-3")))
		}, "ckpt-2", nil, []string{"is missing", "ckpt-3"}},
		{"pointer corrupt", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, PointerFile), []byte(`{"format": "towerflow-checkpoint-v1", "lat`), 0o644))
		}, "ckpt-3", nil, []string{"pointer file is damaged"}},
		{"pointer naming nonsense", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, PointerFile), []byte(`{"format": "towerflow-checkpoint-v1", "latest": "../x", "checkpoints": ["../x"]}`), 0o644))
		}, "ckpt-3", nil, []string{"pointer file is damaged"}},
		{"pointer missing", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, PointerFile)))
		}, "ckpt-3", nil, []string{"no pointer file"}},
		{"pointer missing and newest damaged", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, PointerFile)))
			must(t, os.Truncate(filepath.Join(dir, "ckpt-3", "0001-dense~b.npy"), 10))
		}, "ckpt-2", nil, []string{"no pointer file", "0001-dense~b.npy"}},
		{"pointer behind the directories", func(t *testing.T, dir string) {
			// A Save killed between renaming ckpt-3 into place and
			// writing the pointer: the pointer still says ckpt-2.
			p := pointer{Format: Format, Latest: "ckpt-2", Checkpoints: []string{"ckpt-1", "ckpt-2"}}
			b, _ := json.Marshal(p)
			must(t, os.WriteFile(filepath.Join(dir, PointerFile), b, 0o644))
		}, "ckpt-2", nil, nil},
		{"stale temp dirs only", func(t *testing.T, dir string) {
			for _, c := range []string{"ckpt-1", "ckpt-2", "ckpt-3"} {
				must(t, os.Rename(filepath.Join(dir, c), filepath.Join(dir, ".tmp-"+c+"-1")))
			}
			must(t, os.Remove(filepath.Join(dir, PointerFile)))
		}, "", ErrNoCheckpoint, nil},
		// A directory with checkpoints but none whole is data loss, not
		// a fresh start; the error says what is wrong with each.
		{"everything damaged", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "ckpt-3", ManifestFile)))
			flip(t, filepath.Join(dir, "ckpt-2", "0001-dense~b.npy"), -1)
			must(t, os.Truncate(filepath.Join(dir, "ckpt-1", "0002-scale.npy"), 20))
		}, "", ErrDamaged, []string{
			filepath.Join("ckpt-3", ManifestFile) + ": manifest is missing",
			filepath.Join("ckpt-2", "0001-dense~b.npy") + ": file is corrupted",
			filepath.Join("ckpt-1", "0002-scale.npy") + ": file is truncated",
		}},
		{"everything damaged, no pointer file", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, PointerFile)))
			for _, c := range []string{"ckpt-1", "ckpt-2", "ckpt-3"} {
				flip(t, filepath.Join(dir, c, "0000-dense~w.npy"), -1)
			}
		}, "", ErrDamaged, []string{"ckpt-3", "ckpt-2", "ckpt-1", "corrupted"}},
		{"every checkpoint the pointer names is missing", func(t *testing.T, dir string) {
			for _, c := range []string{"ckpt-1", "ckpt-2", "ckpt-3"} {
				must(t, os.RemoveAll(filepath.Join(dir, c)))
			}
		}, "", ErrDamaged, []string{"ckpt-3, named by the pointer file, is missing", "ckpt-1, named by the pointer file, is missing"}},
		{"a damaged pointer file and no checkpoint", func(t *testing.T, dir string) {
			for _, c := range []string{"ckpt-1", "ckpt-2", "ckpt-3"} {
				must(t, os.RemoveAll(filepath.Join(dir, c)))
			}
			must(t, os.WriteFile(filepath.Join(dir, PointerFile), []byte("{"), 0o644))
		}, "", ErrDamaged, []string{PointerFile, "no checkpoint directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := setup(t)
			tt.damage(t, dir)
			r, err := Read(dir)
			// What Read says it skipped, or with nothing whole its error.
			var l string
			if tt.want == "" {
				if !errors.Is(err, tt.is) {
					t.Errorf("Read = %v, %v; want %v", r, err, tt.is)
				}
				if tt.is == ErrDamaged && errors.Is(err, ErrNoCheckpoint) {
					t.Errorf("Read = %v: damage must not read as a fresh directory (ErrNoCheckpoint)", err)
				}
				if _, lerr := Latest(dir); !errors.Is(lerr, tt.is) {
					t.Errorf("Latest = %v, want %v", lerr, tt.is)
				}
				if err != nil {
					l = err.Error()
				}
			} else if want := filepath.Join(dir, tt.want); err != nil || r.Path() != want {
				t.Fatalf("Read = %v, %v; want %q", r, err, want)
			} else {
				l = strings.Join(r.Skipped(), "\n")
				if len(tt.wantLogs) == 0 && l != "" {
					t.Errorf("unexpected notes %q", l)
				}
			}
			for _, w := range tt.wantLogs {
				if !strings.Contains(l, w) {
					t.Errorf("notes %q lack %q", l, w)
				}
			}
			// A save after the damage repairs the pointer.
			if tt.want != "" {
				if _, err := Save(dir, newStore(t, testVars[:3], 1), 9, 0); err != nil {
					t.Fatal(err)
				}
				if got, err := Latest(dir); err != nil || got != filepath.Join(dir, "ckpt-9") {
					t.Errorf("Latest after a new save = %q, %v", got, err)
				}
			}
		})
	}
}

func TestNoCheckpoint(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{empty, filepath.Join(empty, "does-not-exist")} {
		if _, err := Latest(dir); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("Latest(%s) = %v, want ErrNoCheckpoint", dir, err)
		}
	}
	if _, err := Read(empty); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Read(empty dir) = %v, want ErrNoCheckpoint", err)
	}
	if _, err := Read(filepath.Join(empty, "ckpt-3")); err == nil || !strings.Contains(err.Error(), filepath.Join(empty, "ckpt-3", ManifestFile)) {
		t.Errorf("Read(missing ckpt dir) = %v, want an error naming its manifest", err)
	}
}

func TestWarmStart(t *testing.T) {
	// The previous run: a model with an optimizer, at step 1000.
	prevDefs := []varDef{
		{"old/dense/w", tensor.Float32, []int{3, 4}, true},
		{"old/dense/b", tensor.Float32, []int{4}, true},
		{"head/w", tensor.Float64, []int{4, 2}, true},
		{"head/w/Adam/m", tensor.Float64, []int{4, 2}, false},
		{"global_step", tensor.Int64, []int{}, false},
	}
	prev := newStore(t, prevDefs, 100)
	prevDir := t.TempDir()
	if _, err := Save(prevDir, prev, 1000, 0); err != nil {
		t.Fatal(err)
	}
	prevVals := map[string]any{}
	for _, v := range snapshot(prev) {
		prevVals[v.Name] = v.Data
	}

	newDefs := []varDef{
		{"dense/w", tensor.Float32, []int{3, 4}, true},
		{"dense/b", tensor.Float32, []int{4}, true},
		{"head/w", tensor.Float64, []int{4, 2}, true},
		{"head/w/Adam/m", tensor.Float64, []int{4, 2}, false},
		{"global_step", tensor.Int64, []int{}, false},
	}
	rename := map[string]string{"dense/w": "old/dense/w", "dense/b": "old/dense/b"}
	tests := []struct {
		name    string
		pattern string
		rename  map[string]string
		// from maps warm-started store names to checkpoint names.
		from    map[string]string
		wantErr string
	}{
		{name: "all trainable", rename: rename,
			from: map[string]string{"dense/w": "old/dense/w", "dense/b": "old/dense/b", "head/w": "head/w"}},
		{name: "pattern", pattern: "^dense/", rename: rename,
			from: map[string]string{"dense/w": "old/dense/w", "dense/b": "old/dense/b"}},
		{name: "pattern without renames", pattern: "^head/",
			from: map[string]string{"head/w": "head/w"}},
		{name: "pattern on non-trainable names selects nothing", pattern: "Adam|global_step",
			wantErr: `pattern "Adam|global_step" selects no trainable variable`},
		{name: "missing without rename", pattern: "dense",
			wantErr: `lacks variables "dense/w", "dense/b"`},
		{name: "missing renamed", pattern: "dense", rename: map[string]string{"dense/w": "old/dense/w", "dense/b": "old/dense/bias"},
			wantErr: `lacks variables "dense/b" (as "old/dense/bias")`},
		{name: "rename of an unselected variable", pattern: "^head/", rename: rename,
			wantErr: `rename names variables that are not warm-started (not in the store, not trainable or not matching "^head/"): ["dense/b" "dense/w"]`},
		{name: "rename of a non-trainable variable", pattern: "^head/", rename: map[string]string{"global_step": "global_step"},
			wantErr: `["global_step"]`},
		{name: "rename of an unknown variable", pattern: "^head/", rename: map[string]string{"nope": "head/w"},
			wantErr: `["nope"]`},
		{name: "shape mismatch", pattern: "^dense/b$", rename: map[string]string{"dense/b": "old/dense/w"},
			wantErr: `variable "dense/b" (checkpoint variable "old/dense/w") has shape [4] dtype float32 in the model but shape [3 4] dtype float32 in checkpoint `},
		{name: "rename to any variable of equal shape and dtype", pattern: "^head/w$", rename: map[string]string{"head/w": "head/w/Adam/m"},
			from: map[string]string{"head/w": "head/w/Adam/m"}},
		{name: "bad pattern", pattern: "(", wantErr: "pattern: error parsing regexp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, newDefs, 7)
			before := snapshot(store)
			err := warmStart(store, prevDir, tt.pattern, tt.rename)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("WarmStart = %v, want error containing %q", err, tt.wantErr)
				}
				if diff := cmp.Diff(before, snapshot(store)); diff != "" {
					t.Errorf("failed warm start changed the store (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(before)
			for i, v := range want {
				if from, ok := tt.from[v.Name]; ok {
					want[i].Data = prevVals[from]
				}
			}
			if diff := cmp.Diff(want, snapshot(store)); diff != "" {
				t.Errorf("store after warm start (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("dtype mismatch", func(t *testing.T) {
		store := newStore(t, []varDef{{"head/w", tensor.Float32, []int{4, 2}, true}}, 1)
		err := warmStart(store, prevDir, "", nil)
		if want := `variable "head/w" has shape [4 2] dtype float32 in the model but shape [4 2] dtype float64`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("WarmStart = %v, want error containing %q", err, want)
		}
	})
	t.Run("no checkpoint", func(t *testing.T) {
		store := newStore(t, newDefs, 1)
		if err := warmStart(store, t.TempDir(), "", nil); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("WarmStart from an empty dir = %v, want ErrNoCheckpoint", err)
		}
	})
	t.Run("from a checkpoint directory", func(t *testing.T) {
		store := newStore(t, newDefs, 1)
		if err := warmStart(store, filepath.Join(prevDir, "ckpt-1000"), "^head/w$", nil); err != nil {
			t.Fatal(err)
		}
		got, _ := store.Value("head/w")
		if diff := cmp.Diff(prevVals["head/w"], got.Data()); diff != "" {
			t.Errorf("head/w (-want +got):\n%s", diff)
		}
	})
}

// warmStart reads ckpt, a checkpoint or model directory, and warm-starts
// store from it.
func warmStart(store *towers.Store, ckpt, pattern string, rename map[string]string) error {
	r, err := Read(ckpt)
	if err != nil {
		return err
	}
	return r.WarmStart(store, pattern, rename)
}

func TestSafeName(t *testing.T) {
	tests := map[string]string{
		"w/Adam/m":               "w~Adam~m",
		"a b:c*d?":               "a_b_c_d_",
		"..":                     "..",
		"ünï/x":                  "_n_~x",
		strings.Repeat("x", 300): strings.Repeat("x", 100),
	}
	for in, want := range tests {
		if got := safeName(in); got != want {
			t.Errorf("safeName(%q) = %q, want %q", in, got, want)
		}
	}
	// Names that clash after escaping still get distinct files.
	s := newStore(t, []varDef{{"a/b", tensor.Float32, []int{1}, true}, {"a~b", tensor.Float32, []int{1}, true}, {"a:b", tensor.Float32, []int{1}, true}}, 1)
	path, err := Save(t.TempDir(), s, 1, 0)
	must(t, err)
	r, err := Read(path)
	must(t, err)
	var files []string
	for _, e := range r.Manifest().Variables {
		files = append(files, e.File)
	}
	if diff := cmp.Diff([]string{"0000-a~b.npy", "0001-a~b.npy", "0002-a_b.npy"}, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if ok := regexp.MustCompile(`^[0-9]{4}-`).MatchString(files[0]); !ok {
		t.Errorf("file %q lacks the index prefix", files[0])
	}
}
