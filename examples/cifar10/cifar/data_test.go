package cifar_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/examples/cifar10/cifar"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// set returns n examples with labels 0, 1, 2… (mod 10) and images whose
// bytes count up from the example's index.
func set(n int) *cifar.Set {
	s := &cifar.Set{Labels: make([]byte, n), Pixels: make([]byte, n*cifar.ImageSize)}
	for i := range n {
		s.Labels[i] = byte(i % cifar.Classes)
		for j := range cifar.ImageSize {
			s.Pixels[i*cifar.ImageSize+j] = byte(i + j)
		}
	}
	return s
}

// records returns CIFAR-10 records of the given labels, each image filled
// with its label.
func records(labels ...byte) []byte {
	var b []byte
	for _, l := range labels {
		b = append(b, l)
		b = append(b, bytes.Repeat([]byte{l}, cifar.ImageSize)...)
	}
	return b
}

// fastBytes compares byte slices as a whole: cmp's reflection takes
// a second for a few hundred images.
var fastBytes = cmp.Comparer(bytes.Equal)

func TestWriteRead(t *testing.T) {
	tests := []struct {
		name  string
		split cifar.Split
		set   *cifar.Set
		// sizes are the records in each of the split's files.
		sizes []int
	}{
		{"test, one example", cifar.Test, set(1), []int{1}},
		{"test, several", cifar.Test, set(7), []int{7}},
		{"train, fewer than the files", cifar.Train, set(3), []int{1, 1, 1, 0, 0}},
		{"train, uneven", cifar.Train, set(13), []int{3, 3, 3, 2, 2}},
		{"train, even", cifar.Train, set(10), []int{2, 2, 2, 2, 2}},
		{"train, synthetic", cifar.Train, cifar.Synthetic(23, 1), []int{5, 5, 5, 4, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := cifar.Write(dir, tc.split, tc.set); err != nil {
				t.Fatal(err)
			}
			var sizes []int
			for _, name := range tc.split.Files() {
				fi, err := os.Stat(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size()%cifar.RecordSize != 0 {
					t.Errorf("%s has %d bytes, no whole number of records", name, fi.Size())
				}
				sizes = append(sizes, int(fi.Size()/cifar.RecordSize))
			}
			if diff := cmp.Diff(tc.sizes, sizes); diff != "" {
				t.Errorf("records per file (-want +got):\n%s", diff)
			}
			got, err := cifar.Read(dir, tc.split)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.set, got, cmpopts.EquateEmpty(), fastBytes); diff != "" {
				t.Errorf("read back (-wrote +read):\n%s", diff)
			}
		})
	}
}

// TestReadFormat reads hand-made files: the records' bytes as the format
// says, not as Write writes them.
func TestReadFormat(t *testing.T) {
	dir := t.TempDir()
	img := make([]byte, cifar.ImageSize)
	img[0], img[1023], img[1024], img[3071] = 1, 2, 3, 4 // first red, last red, first green, last blue
	file := append([]byte{9}, img...)
	file = append(file, records(0)...)
	if err := os.WriteFile(filepath.Join(dir, "test_batch.bin"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := cifar.Read(dir, cifar.Test)
	if err != nil {
		t.Fatal(err)
	}
	want := &cifar.Set{Labels: []byte{9, 0}, Pixels: append(img, make([]byte, cifar.ImageSize)...)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read (-want +got):\n%s", diff)
	}
}

func TestReadErrors(t *testing.T) {
	good := records(1, 2)
	trainFiles := func(replace map[string][]byte) map[string][]byte {
		files := map[string][]byte{}
		for i := range 5 {
			files[fmt.Sprintf("data_batch_%d.bin", i+1)] = good
		}
		for name, b := range replace {
			if b == nil {
				delete(files, name)
			} else {
				files[name] = b
			}
		}
		return files
	}
	tests := []struct {
		name  string
		split cifar.Split
		files map[string][]byte
		want  []string
	}{
		{"record cut", cifar.Train, trainFiles(map[string][]byte{"data_batch_2.bin": records(1, 2, 3)[:2*3073+1200]}),
			[]string{"data_batch_2.bin: record 2 is cut after 1200 of its 3073 bytes"}},
		{"record cut after its label", cifar.Test, map[string][]byte{"test_batch.bin": records(4)[:1]},
			[]string{"test_batch.bin: record 0 is cut after 1 of its 3073 bytes"}},
		{"a byte too many", cifar.Test, map[string][]byte{"test_batch.bin": append(records(4, 5), 0)},
			[]string{"test_batch.bin: record 2 is cut after 1 of its 3073 bytes"}},
		{"label out of range", cifar.Train, trainFiles(map[string][]byte{"data_batch_5.bin": records(0, 9, 10)}),
			[]string{"data_batch_5.bin: record 2 has label 10, want 0 to 9"}},
		{"label 255", cifar.Test, map[string][]byte{"test_batch.bin": records(255)},
			[]string{"test_batch.bin: record 0 has label 255"}},
		{"one file missing", cifar.Train, trainFiles(map[string][]byte{"data_batch_3.bin": nil}),
			[]string{"the train split's data_batch_3.bin is missing"}},
		{"two files missing", cifar.Train, trainFiles(map[string][]byte{"data_batch_1.bin": nil, "data_batch_4.bin": nil}),
			[]string{"the train split's data_batch_1.bin and data_batch_4.bin are missing"}},
		{"no files", cifar.Test, nil, []string{"the test split's test_batch.bin is missing"}},
		{"empty split", cifar.Test, map[string][]byte{"test_batch.bin": {}}, []string{"the test split (test_batch.bin) has no examples"}},
		{"empty train split", cifar.Train, map[string][]byte{"data_batch_1.bin": {}, "data_batch_2.bin": {}, "data_batch_3.bin": {}, "data_batch_4.bin": {}, "data_batch_5.bin": {}},
			[]string{"the train split (data_batch_1.bin, ", "data_batch_5.bin) has no examples"}},
		{"no such split", cifar.Split("validation"), nil, []string{`no split "validation"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := cifar.Read(dir, tc.split)
			if tc.files != nil {
				tc.want = append(tc.want, dir)
			}
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}

func TestReadNotAFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "test_batch.bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := cifar.Read(dir, cifar.Test)
	wanterr.Mentions(t, err, filepath.Join(dir, "test_batch.bin"), "directory")
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if err := cifar.WriteSynthetic(dir, 30, 10, 5); err != nil {
		t.Fatal(err)
	}
	train, test, err := cifar.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([2]*cifar.Set{cifar.Synthetic(30, 5), cifar.Synthetic(10, 6)}, [2]*cifar.Set{train, test}, fastBytes); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}
	if err := os.Remove(filepath.Join(dir, "test_batch.bin")); err != nil {
		t.Fatal(err)
	}
	_, _, err = cifar.Load(dir)
	wanterr.Mentions(t, err, dir, "test_batch.bin is missing")
}

func TestWriteErrors(t *testing.T) {
	ragged := set(3)
	ragged.Pixels = ragged.Pixels[:100]
	badLabel := set(3)
	badLabel.Labels[1] = 10
	tests := []struct {
		name  string
		write func(dir string) error
		want  []string
	}{
		{"ragged set", func(dir string) error { return cifar.Write(dir, cifar.Train, ragged) },
			[]string{"write train: 100 pixels are not 3 images of 3072 bytes"}},
		{"label out of range", func(dir string) error { return cifar.Write(dir, cifar.Test, badLabel) },
			[]string{"write test: example 1 has label 10, want 0 to 9"}},
		{"no such split", func(dir string) error { return cifar.Write(dir, "valid", set(1)) },
			[]string{`no split "valid"`}},
		{"no such directory", func(dir string) error { return cifar.Write(filepath.Join(dir, "nope"), cifar.Test, set(1)) },
			[]string{"nope", "test_batch.bin"}},
		{"no synthetic test examples", func(dir string) error { return cifar.WriteSynthetic(dir, 10, 0, 1) },
			[]string{"10 training and 0 test examples"}},
		{"encode", func(string) error { return cifar.Encode(&bytes.Buffer{}, ragged) },
			[]string{"encode CIFAR-10: 100 pixels are not 3 images"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wanterr.Mentions(t, tc.write(t.TempDir()), tc.want...)
		})
	}
}

func TestDecodeAppends(t *testing.T) {
	s := set(2)
	want := set(2)
	want.Labels = append(want.Labels, 7)
	want.Pixels = append(want.Pixels, bytes.Repeat([]byte{7}, cifar.ImageSize)...)
	if err := cifar.Decode(bytes.NewReader(records(7)), "x", s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	// A damaged file leaves the set as it was.
	err := cifar.Decode(bytes.NewReader(records(1, 11)), "y", s)
	wanterr.Mentions(t, err, "y: record 1 has label 11")
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("after a damaged file (-want +got):\n%s", diff)
	}
}

func TestTensors(t *testing.T) {
	s := set(2)
	s.Pixels[0], s.Pixels[1024], s.Pixels[2048] = 0, 255, 128 // example 0: red, green, blue of pixel (0, 0)
	x := s.Features()[cifar.ImageKey]
	y := s.LabelTensors()[cifar.LabelKey]
	if diff := cmp.Diff([][]int{{2, 3, 32, 32}, {2}}, [][]int{x.Shape(), y.Shape()}); diff != "" {
		t.Errorf("shapes (-want +got):\n%s", diff)
	}
	data := x.Data().([]float32)
	// The values by hand: (p/255 − mean)/std.
	want := []float32{(0 - 0.4914) / 0.2470, (1 - 0.4822) / 0.2435, (128.0/255 - 0.4465) / 0.2616}
	got := []float32{data[0], data[1024], data[2048]}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("normalized pixels (-want +got):\n%s", diff)
	}
	for c := range cifar.Channels {
		for p := range 256 {
			if got, want := cifar.Normalize(c, byte(p)), (float32(p)/255-cifar.Mean[c])/cifar.Std[c]; got != want {
				t.Errorf("Normalize(%d, %d) = %v, want %v", c, p, got, want)
			}
		}
	}
	for i, p := range s.Pixels {
		if want := cifar.Normalize(i%cifar.ImageSize/1024, p); data[i] != want {
			t.Fatalf("pixel %d: %v, want %v", i, data[i], want)
		}
	}
	if diff := cmp.Diff([]int64{0, 1}, y.Data()); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

func TestSynthetic(t *testing.T) {
	a, b, other := cifar.Synthetic(300, 3), cifar.Synthetic(300, 3), cifar.Synthetic(300, 4)
	if !bytes.Equal(a.Pixels, b.Pixels) || !bytes.Equal(a.Labels, b.Labels) {
		t.Error("seed 3 gave different sets")
	}
	if bytes.Equal(a.Pixels, other.Pixels) {
		t.Error("seeds 3 and 4 gave the same images")
	}
	if len(a.Pixels) != 300*cifar.ImageSize {
		t.Fatalf("%d pixels, want %d", len(a.Pixels), 300*cifar.ImageSize)
	}
}

// TestSyntheticSeparable: a nearest-class-mean classifier of raw pixels,
// fitted on one synthetic set, tells the classes of another apart far
// better than chance (10%).
func TestSyntheticSeparable(t *testing.T) {
	train, test := cifar.Synthetic(2000, 1), cifar.Synthetic(500, 2)
	var count [cifar.Classes]int
	var mean [cifar.Classes][cifar.ImageSize]float64
	for i, l := range train.Labels {
		count[l]++
		for j, p := range train.Image(i) {
			mean[l][j] += float64(p)
		}
	}
	for c := range cifar.Classes {
		if count[c] < 100 {
			t.Errorf("class %d appears %d times in 2000, want at least 100", c, count[c])
		}
		for j := range mean[c] {
			mean[c][j] /= float64(count[c])
		}
	}
	right := 0
	for i, l := range test.Labels {
		best, bestDist := -1, 0.0
		for c := range cifar.Classes {
			var d float64
			for j, p := range test.Image(i) {
				d += (float64(p) - mean[c][j]) * (float64(p) - mean[c][j])
			}
			if best < 0 || d < bestDist {
				best, bestDist = c, d
			}
		}
		if best == int(l) {
			right++
		}
	}
	acc := float64(right) / float64(test.Len())
	t.Logf("nearest class mean: %.1f%% right", 100*acc)
	if acc < 0.5 {
		t.Errorf("nearest class mean gets %.1f%% of the test set right, want more than 50%%", 100*acc)
	}
}
