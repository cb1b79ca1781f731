package mnist_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// small is a set of 3 images of 2×3 pixels.
func small() *mnist.Set {
	return &mnist.Set{Rows: 2, Cols: 3, Pixels: []byte{
		0, 1, 2, 3, 4, 5,
		255, 254, 253, 252, 251, 250,
		9, 0, 9, 0, 9, 0,
	}, Labels: []byte{7, 0, 9}}
}

func TestWriteRead(t *testing.T) {
	tests := []struct {
		name string
		set  *mnist.Set
		gz   bool
	}{
		{"2x3 plain", small(), false},
		{"2x3 gzip", small(), true},
		{"synthetic plain", mnist.Synthetic(20, 1), false},
		{"synthetic gzip", mnist.Synthetic(20, 1), true},
		{"no examples", &mnist.Set{Rows: 28, Cols: 28, Pixels: []byte{}, Labels: []byte{}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := mnist.Write(dir, mnist.Test, tc.set, tc.gz); err != nil {
				t.Fatal(err)
			}
			suffix := map[bool]string{false: "", true: ".gz"}[tc.gz]
			for _, name := range []string{"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
				if _, err := os.Stat(filepath.Join(dir, name+suffix)); err != nil {
					t.Errorf("file: %v", err)
				}
			}
			got, err := mnist.Read(dir, mnist.Test)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.set, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("read back (-wrote +read):\n%s", diff)
			}
		})
	}
}

// TestReadPrefersPlain: with both NAME and NAME.gz, Read takes NAME; with
// one of a split's files plain and the other gzipped, it takes each.
func TestReadPrefersPlain(t *testing.T) {
	dir := t.TempDir()
	other := small()
	other.Labels = []byte{1, 2, 3}
	other.Pixels[0] = 100
	if err := mnist.Write(dir, mnist.Train, other, true); err != nil {
		t.Fatal(err)
	}
	if err := mnist.Write(dir, mnist.Train, small(), false); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, mnist.Train.LabelsFile())); err != nil {
		t.Fatal(err)
	}
	got, err := mnist.Read(dir, mnist.Train)
	if err != nil {
		t.Fatal(err)
	}
	want := small()
	want.Labels = other.Labels // only the gzipped labels are left
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read (-want +got):\n%s", diff)
	}
}

// idx returns an IDX file: a header of big-endian uint32s, then data.
func idx(data []byte, header ...uint32) []byte {
	b := make([]byte, 4*len(header), 4*len(header)+len(data))
	for i, h := range header {
		binary.BigEndian.PutUint32(b[4*i:], h)
	}
	return append(b, data...)
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	if _, err := z.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadErrors(t *testing.T) {
	pixels := small().Pixels
	goodImages := idx(pixels, mnist.ImagesMagic, 3, 2, 3)
	goodLabels := idx([]byte{7, 0, 9}, mnist.LabelsMagic, 3)
	const images, labels = "train-images-idx3-ubyte", "train-labels-idx1-ubyte"
	// badChecksum is a gzipped images file whose CRC-32 is wrong.
	badChecksum := gz(t, goodImages)
	badChecksum[len(badChecksum)-8] ^= 0xff
	cutTrailer := gz(t, goodImages)
	cutTrailer = cutTrailer[:len(cutTrailer)-4]
	synth := mnist.Synthetic(10, 1)
	synthImages := gz(t, idx(synth.Pixels, mnist.ImagesMagic, 10, 28, 28))
	synthLabels := idx(synth.Labels, mnist.LabelsMagic, 10)
	tests := []struct {
		name  string
		files map[string][]byte
		want  []string
	}{
		{"no images file", map[string][]byte{labels: goodLabels}, []string{"neither " + images + " nor " + images + ".gz"}},
		{"no labels file", map[string][]byte{images: goodImages}, []string{"neither " + labels + " nor " + labels + ".gz"}},
		{"images header cut", map[string][]byte{images: goodImages[:6], labels: goodLabels},
			[]string{images + ": the IDX header ends after 6 of its 16 bytes", "truncated"}},
		{"labels header cut", map[string][]byte{images: goodImages, labels: goodLabels[:7]},
			[]string{labels + ": the IDX header ends after 7 of its 8 bytes"}},
		{"image cut mid-record", map[string][]byte{images: goodImages[:16+6+4], labels: goodLabels},
			[]string{images + ": image 1 of 3: the file ends after 4 of its 6 bytes", "truncated"}},
		{"image cut at a record's end", map[string][]byte{images: goodImages[:16+12], labels: goodLabels},
			[]string{images + ": image 2 of 3: the file ends after 0 of its 6 bytes"}},
		{"gzipped image cut mid-record", map[string][]byte{images + ".gz": gz(t, goodImages[:16+6+4]), labels: goodLabels},
			[]string{images + ".gz: image 1 of 3: the file ends after 4 of its 6 bytes"}},
		{"gzip trailer cut", map[string][]byte{images + ".gz": cutTrailer, labels: goodLabels},
			[]string{images + ".gz: after the last image: truncated"}},
		{"gzip stream cut", map[string][]byte{images + ".gz": synthImages[:len(synthImages)/2], labels: synthLabels},
			[]string{images + ".gz: image ", " of 10: the file ends after", "of its 784 bytes: truncated"}},
		{"gzip checksum", map[string][]byte{images + ".gz": badChecksum, labels: goodLabels},
			[]string{images + ".gz: after the last image", "checksum"}},
		{"labels cut", map[string][]byte{images: goodImages, labels: goodLabels[:10]},
			[]string{labels + ": label 2 of 3: the file ends after 0 of its 1 bytes"}},
		{"images magic", map[string][]byte{images: idx(pixels, mnist.LabelsMagic, 3, 2, 3), labels: goodLabels},
			[]string{images + ": magic number 0x00000801 (a labels file), want 0x00000803 for an IDX file of images"}},
		{"labels magic", map[string][]byte{images: goodImages, labels: idx([]byte{7, 0, 9}, 0x0803, 3)},
			[]string{labels + ": magic number 0x00000803 (an images file), want 0x00000801"}},
		{"float images", map[string][]byte{images: idx(pixels, 0x0d03, 3, 2, 3), labels: goodLabels},
			[]string{"magic number 0x00000d03, want 0x00000803"}},
		{"more images than labels", map[string][]byte{images: goodImages, labels: idx([]byte{7, 0}, mnist.LabelsMagic, 2)},
			[]string{images + " has 3 images but", labels + " has 2 labels"}},
		{"label out of range", map[string][]byte{images: goodImages, labels: idx([]byte{7, 10, 9}, mnist.LabelsMagic, 3)},
			[]string{labels + ": label 1 of 3 is 10, want 0 to 9"}},
		{"data after the images", map[string][]byte{images: append(goodImages[:len(goodImages):len(goodImages)], 0), labels: goodLabels},
			[]string{images + ": more data after the 3 images the header announces"}},
		{"zero columns", map[string][]byte{images: idx(nil, mnist.ImagesMagic, 3, 2, 0), labels: goodLabels},
			[]string{images + ": images of 2×0 pixels"}},
		{"absurd count", map[string][]byte{images: idx(pixels, mnist.ImagesMagic, 1<<20, 1<<16, 1<<16), labels: goodLabels},
			[]string{images + ": the header announces 1048576 images of 65536×65536 pixels, more than 17179869184 bytes: a damaged header?"}},
		{"absurd image", map[string][]byte{images: idx(pixels, mnist.ImagesMagic, 0, 1<<32-1, 1<<32-1), labels: idx(nil, mnist.LabelsMagic, 0)},
			[]string{images + ": the header announces 0 images of 4294967295×4294967295 pixels", "damaged header"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := mnist.Read(dir, mnist.Train)
			wanterr.Mentions(t, err, append(tc.want, dir)...)
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if err := mnist.WriteSynthetic(dir, 30, 10, 5, true); err != nil {
		t.Fatal(err)
	}
	train, test, err := mnist.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([2]*mnist.Set{mnist.Synthetic(30, 5), mnist.Synthetic(10, 6)}, [2]*mnist.Set{train, test}); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}

	// A test split of other images than the training split's.
	if err := mnist.Write(dir, mnist.Test, small(), true); err != nil {
		t.Fatal(err)
	}
	_, _, err = mnist.Load(dir)
	wanterr.Mentions(t, err, dir, "the training images have 28×28 pixels, the test images 2×3")
}

func TestWriteErrors(t *testing.T) {
	ragged := small()
	ragged.Pixels = ragged.Pixels[:17]
	tests := []struct {
		name  string
		write func(dir string) error
		want  []string
	}{
		{"ragged set", func(dir string) error { return mnist.Write(dir, mnist.Train, ragged, false) },
			[]string{"write train: 17 pixels are not 3 images of 2×3"}},
		{"no such directory", func(dir string) error { return mnist.Write(filepath.Join(dir, "nope"), mnist.Train, small(), true) },
			[]string{"nope", "train-images-idx3-ubyte.gz"}},
		{"no synthetic test examples", func(dir string) error { return mnist.WriteSynthetic(dir, 10, 0, 1, false) },
			[]string{"10 training and 0 test examples"}},
		{"ragged images", func(string) error { return mnist.EncodeImages(&bytes.Buffer{}, 2, 3, make([]byte, 7)) },
			[]string{"7 pixels are no whole number of 2×3 images"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wanterr.Mentions(t, tc.write(t.TempDir()), tc.want...)
		})
	}
}

func TestTensors(t *testing.T) {
	s := small()
	flat := s.Features(mnist.Flat)[mnist.ImageKey]
	nchw := s.Features(mnist.NCHW)[mnist.ImageKey]
	y := s.LabelTensors()[mnist.LabelKey]
	if diff := cmp.Diff([][]int{{3, 6}, {3, 1, 2, 3}, {3}}, [][]int{flat.Shape(), nchw.Shape(), y.Shape()}); diff != "" {
		t.Errorf("shapes (-want +got):\n%s", diff)
	}
	want := make([]float32, len(s.Pixels))
	for i, p := range s.Pixels {
		want[i] = float32(p) / 255
	}
	if diff := cmp.Diff(want, flat.Data()); diff != "" {
		t.Errorf("flat pixels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, nchw.Data()); diff != "" {
		t.Errorf("NCHW pixels (-want +got):\n%s", diff)
	}
	if got := flat.Data().([]float32); got[6] != 1 || got[0] != 0 {
		t.Errorf("pixels 255 and 0 became %v and %v, want 1 and 0", got[6], got[0])
	}
	if diff := cmp.Diff([]int64{7, 0, 9}, y.Data()); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

func TestSynthetic(t *testing.T) {
	a, b, other := mnist.Synthetic(500, 3), mnist.Synthetic(500, 3), mnist.Synthetic(500, 4)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different sets (-first +second):\n%s", diff)
	}
	if cmp.Equal(a.Pixels, other.Pixels) {
		t.Error("seeds 3 and 4 gave the same images")
	}
	if a.Rows != 28 || a.Cols != 28 || len(a.Pixels) != 500*28*28 {
		t.Fatalf("%d×%d images, %d pixels: want 28×28, %d", a.Rows, a.Cols, len(a.Pixels), 500*28*28)
	}
	// Every digit appears, and the mean images of any two digits differ
	// by a clear margin: the classes are told apart by their pattern.
	var count [mnist.Classes]int
	var mean [mnist.Classes][28 * 28]float64
	for i, l := range a.Labels {
		count[l]++
		for j, p := range a.Pixels[i*784 : (i+1)*784] {
			mean[l][j] += float64(p) / 255
		}
	}
	for d := range mnist.Classes {
		if count[d] < 20 {
			t.Errorf("digit %d appears %d times in 500, want at least 20", d, count[d])
		}
		for j := range mean[d] {
			mean[d][j] /= float64(count[d])
		}
	}
	for d := range mnist.Classes {
		for e := d + 1; e < mnist.Classes; e++ {
			var dist float64
			for j := range mean[d] {
				dist += (mean[d][j] - mean[e][j]) * (mean[d][j] - mean[e][j])
			}
			if dist < 2 {
				t.Errorf("the mean images of digits %d and %d are %.2f apart (squared), want at least 2", d, e, dist)
			}
		}
	}
}
