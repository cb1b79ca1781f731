package bf16_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/bf16"
	"github.com/towerflow/towerflow/internal/testpython"
)

// samples are float32 bit patterns that exercise the rounding: ties with
// an even and an odd kept half, values just off a tie, the largest finite
// values (rounding up to Inf or not), subnormals, signed zeros, Inf and
// NaNs (quiet, signalling, negative); then random patterns.
func samples() []uint32 {
	s := []uint32{
		0x3f800000, 0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, 0x3f80ffff,
		0xbf808000, 0xbf818000, 0x7f7f8000, 0x7f7f7fff, 0x7f7fffff, 0x7f7effff,
		0xff7fffff, 0x00000001, 0x00008000, 0x00018000, 0x00007fff, 0x807fffff,
		0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
		0xff800001, 0xffc00001, 0x7fbfffff, 0x40490fdb, 0x3dcccccd,
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s = append(s, r.Uint32())
	}
	for range 2000 { // ties
		s = append(s, r.Uint32()&0xffff0000|0x8000)
	}
	return s
}

// TestFromFloat32AgainstPyTorch: FromFloat32 gives the bits of PyTorch's
// torch.tensor(x).bfloat16() for every sample, NaNs included (compared as
// any NaN: PyTorch's vector loops write 0xffff for every NaN, FromFloat32
// keeps the sign and sets the quiet bit). Without PyTorch, NumPy's integer
// arithmetic (the rounding written out) is the reference.
func TestFromFloat32AgainstPyTorch(t *testing.T) {
	py := testpython.Find(t, "python3-numpy", "numpy")
	in := samples()
	dir := t.TempDir()
	raw := make([]byte, 4*len(in))
	for i, u := range in {
		binary.LittleEndian.PutUint32(raw[4*i:], u)
	}
	inPath, outPath := filepath.Join(dir, "in.f32"), filepath.Join(dir, "out.bf16")
	if err := os.WriteFile(inPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import sys, numpy as np
x = np.fromfile(sys.argv[1], dtype='<f4')
try:
    import torch
    b = torch.from_numpy(x.copy()).bfloat16().view(torch.int16).numpy().view(np.uint16)
    print("torch")
except ImportError:
    u = x.view(np.uint32).astype(np.uint64)
    b = ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    b[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    print("numpy")
b.astype('<u2').tofile(sys.argv[2])
`
	out, err := exec.Command(py, "-c", script, inPath, outPath).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", py, err, out)
	}
	t.Logf("reference: %s", strings.TrimSpace(string(out)))
	ref, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref) != 2*len(in) {
		t.Fatalf("reference wrote %d bytes, want %d", len(ref), 2*len(in))
	}
	var diffs []string
	for i, u := range in {
		want := binary.LittleEndian.Uint16(ref[2*i:])
		got := bf16.FromFloat32(math.Float32frombits(u))
		if isNaN(want) && isNaN(got) {
			continue
		}
		if got != want && len(diffs) < 10 {
			diffs = append(diffs, fmt.Sprintf("%#08x: got %#04x, reference %#04x", u, got, want))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("FromFloat32 differs from the reference:\n%s", strings.Join(diffs, "\n"))
	}
}

func isNaN(b uint16) bool { return b&0x7f80 == 0x7f80 && b&0x7f != 0 }

// TestRound checks the rounding rule on named cases, and that every
// bfloat16 converts back to itself.
func TestRound(t *testing.T) {
	tests := []struct {
		name string
		in   uint32
		want uint16
	}{
		{"exact", 0x3f800000, 0x3f80},
		{"tie to even, down", 0x3f808000, 0x3f80},
		{"tie to even, up", 0x3f818000, 0x3f82},
		{"below tie", 0x3f807fff, 0x3f80},
		{"above tie", 0x3f808001, 0x3f81},
		{"largest finite stays", 0x7f7f7fff, 0x7f7f},
		{"overflow to Inf", 0x7f7f8000, 0x7f80},
		{"negative overflow", 0xff7fffff, 0xff80},
		{"smallest subnormal rounds to zero", 0x00000001, 0x0000},
		{"subnormal tie to even", 0x00018000, 0x0002},
		{"negative zero", 0x80000000, 0x8000},
		{"Inf", 0x7f800000, 0x7f80},
		{"signalling NaN becomes quiet", 0x7f800001, 0x7fc0},
		{"NaN whose rounding would carry into the exponent", 0x7fffffff, 0x7fff},
		{"negative NaN", 0xffc00001, 0xffc0},
	}
	for _, tt := range tests {
		if got := bf16.FromFloat32(math.Float32frombits(tt.in)); got != tt.want {
			t.Errorf("%s: FromFloat32(%#08x) = %#04x, want %#04x", tt.name, tt.in, got, tt.want)
		}
	}
	for b := range 1 << 16 {
		if isNaN(uint16(b)) {
			continue
		}
		if got := bf16.FromFloat32(bf16.ToFloat32(uint16(b))); got != uint16(b) {
			t.Fatalf("FromFloat32(ToFloat32(%#04x)) = %#04x", b, got)
		}
	}
	src := []float32{1, 1.00390625, -3.14159265, 1e-40}
	dst := make([]uint16, len(src))
	bf16.Convert(dst, src)
	want := make([]uint16, len(src))
	for i, f := range src {
		want[i] = bf16.FromFloat32(f)
	}
	if diff := cmp.Diff(want, dst); diff != "" {
		t.Errorf("Convert (-FromFloat32 +Convert):\n%s", diff)
	}
	tr := make([]uint16, 6)
	bf16.ConvertTransposed(tr, []float32{1, 2, 3, 4, 5, 1.00390625}, 2, 3) // [[1 2 3] [4 5 1.0039]]
	if diff := cmp.Diff([]uint16{0x3f80, 0x4080, 0x4000, 0x40a0, 0x4040, 0x3f80}, tr); diff != "" {
		t.Errorf("ConvertTransposed (-want +got):\n%s", diff)
	}
	if got := bf16.Round(1.00390625); got != 1 {
		t.Errorf("Round(1.00390625) = %v, want 1 (a tie, to even)", got)
	}
}
