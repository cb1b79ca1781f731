package mnist_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/examples/mnist/mnist"
)

// FuzzDecodeIDX: decoding any bytes as an IDX images or labels file gives
// an error or the images (whole ones, of at least a pixel) or labels
// (digits) that the encoder writes and the decoder reads back equal; it
// never panics. Seeds are the files Write writes, plain and gzipped.
//
//	go test -run '^$' -fuzz '^FuzzDecodeIDX$' -fuzztime 60s -fuzzminimizetime 1s ./examples/mnist/mnist
func FuzzDecodeIDX(f *testing.F) {
	dir := f.TempDir()
	for _, gz := range []bool{false, true} {
		if err := mnist.Write(dir, mnist.Train, mnist.Synthetic(2, 1), gz); err != nil {
			f.Fatal(err)
		}
		suffix := ""
		if gz {
			suffix = ".gz"
		}
		for i, name := range []string{mnist.Train.ImagesFile(), mnist.Train.LabelsFile()} {
			b, err := os.ReadFile(filepath.Join(dir, name+suffix))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), b)
			f.Add(uint8(i), b[:len(b)-1])
		}
	}
	f.Add(uint8(0), []byte{0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 28, 0, 0, 0, 28})
	f.Add(uint8(1), []byte{0, 0, 8, 1, 0, 0, 0, 1, 10})
	f.Add(uint8(0), []byte{0, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1})
	f.Add(uint8(1), []byte{0, 0, 8, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, kind uint8, file []byte) {
		var b bytes.Buffer
		if kind%2 == 1 {
			labels, err := mnist.DecodeLabels(bytes.NewReader(file), "f")
			if err != nil {
				return
			}
			for i, l := range labels {
				if l >= mnist.Classes {
					t.Fatalf("label %d is %d", i, l)
				}
			}
			if err := mnist.EncodeLabels(&b, labels); err != nil {
				t.Fatal(err)
			}
			again, err := mnist.DecodeLabels(&b, "again")
			if err != nil {
				t.Fatalf("decoding the re-encoding: %v", err)
			}
			if diff := cmp.Diff(labels, again); diff != "" {
				t.Fatalf("labels encoded and decoded (-first +again):\n%s", diff)
			}
			return
		}
		rows, cols, pixels, err := mnist.DecodeImages(bytes.NewReader(file), "f")
		if err != nil {
			return
		}
		if rows < 1 || cols < 1 || len(pixels)%(rows*cols) != 0 {
			t.Fatalf("%d pixels of images of %d×%d", len(pixels), rows, cols)
		}
		if err := mnist.EncodeImages(&b, rows, cols, pixels); err != nil {
			t.Fatal(err)
		}
		r2, c2, again, err := mnist.DecodeImages(&b, "again")
		if err != nil {
			t.Fatalf("decoding the re-encoding: %v", err)
		}
		if diff := cmp.Diff([]any{rows, cols, pixels}, []any{r2, c2, again}); diff != "" {
			t.Fatalf("images encoded and decoded (-first +again):\n%s", diff)
		}
	})
}
