package cifar

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/fsutil"
)

// The keys of the examples' feature and label in a batch, and of the
// served model's input.
const (
	ImageKey = "image"
	LabelKey = "label"
)

// Split is one of the data set's two parts.
type Split string

// CIFAR-10's 50,000 training and 10,000 test examples.
const (
	Train Split = "train"
	Test  Split = "test"
)

// TrainFiles is the number of files of the training split.
const TrainFiles = 5

// Files returns the names of the split's files, in the order of its
// examples: data_batch_1.bin to data_batch_5.bin, or test_batch.bin.
func (s Split) Files() []string {
	switch s {
	case Train:
		names := make([]string, TrainFiles)
		for i := range names {
			names[i] = fmt.Sprintf("data_batch_%d.bin", i+1)
		}
		return names
	case Test:
		return []string{"test_batch.bin"}
	}
	return nil
}

// Set is a split's examples: a label 0..9 per example, and its image,
// ImageSize bytes as in the files (three planes, red, green and blue, of
// Side×Side pixels, row-major), image after image.
type Set struct {
	Labels []byte
	Pixels []byte
}

// Len returns the number of examples.
func (s *Set) Len() int { return len(s.Labels) }

// Image returns the pixels of example i.
func (s *Set) Image(i int) []byte { return s.Pixels[i*ImageSize : (i+1)*ImageSize] }

// check checks that s has an image per label and that every label is a
// class.
func (s *Set) check() error {
	if len(s.Pixels) != s.Len()*ImageSize {
		return fmt.Errorf("%d pixels are not %d images of %d bytes", len(s.Pixels), s.Len(), ImageSize)
	}
	for i, l := range s.Labels {
		if l >= Classes {
			return fmt.Errorf("example %d has label %d, want 0 to %d", i, l, Classes-1)
		}
	}
	return nil
}

// Read reads a split from dir: its files (see Split.Files), every one of
// which must be there, in order. Errors name the file and, for a damaged
// record, its index in the file: a file whose length is no whole number of
// records, a label that is no class. A split without examples is an error.
func Read(dir string, split Split) (*Set, error) {
	names := split.Files()
	if names == nil {
		return nil, fmt.Errorf("CIFAR-10 has no split %q, want %q or %q", split, Train, Test)
	}
	var missing []string
	for _, name := range names {
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: the %s split's %s missing (want %s)", dir, split, list(missing), strings.Join(names, ", "))
	}
	var s Set
	for _, name := range names {
		data, err := fsutil.ReadRegular(dir, name)
		if err != nil {
			return nil, err
		}
		if err := decode(data, filepath.Join(dir, name), &s); err != nil {
			return nil, err
		}
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("%s: the %s split (%s) has no examples", dir, split, strings.Join(names, ", "))
	}
	return &s, nil
}

// list returns "a is", "a and b are" or "a, b and c are".
func list(names []string) string {
	if len(names) == 1 {
		return names[0] + " is"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " are"
}

// Load reads the training and test splits from dir (see Read).
func Load(dir string) (train, test *Set, err error) {
	if train, err = Read(dir, Train); err != nil {
		return nil, nil, err
	}
	if test, err = Read(dir, Test); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// Write writes s into dir as split's files: the training examples in turn
// over its five files, the first ones a record longer when they do not
// divide evenly, so that Read reads s back.
func Write(dir string, split Split, s *Set) error {
	names := split.Files()
	if names == nil {
		return fmt.Errorf("write CIFAR-10: no split %q, want %q or %q", split, Train, Test)
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("write %s: %w", split, err)
	}
	n, k := s.Len(), len(names)
	start := 0
	for i, name := range names {
		end := start + n/k
		if i < n%k {
			end++
		}
		part := &Set{Labels: s.Labels[start:end], Pixels: s.Pixels[start*ImageSize : end*ImageSize]}
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		err = Encode(f, part)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		start = end
	}
	return nil
}

// CIFAR-10's per-channel mean and standard deviation of the training
// images' pixels scaled to [0, 1], red, green and blue, as the usual
// training recipes normalize with.
var (
	Mean = [Channels]float32{0.4914, 0.4822, 0.4465}
	Std  = [Channels]float32{0.2470, 0.2435, 0.2616}
)

// normalized[c][p] is pixel value p of channel c normalized:
// (p/255 − Mean[c]) / Std[c].
var normalized = func() (t [Channels][256]float32) {
	for c := range Channels {
		for p := range 256 {
			t[c][p] = (float32(p)/255 - Mean[c]) / Std[c]
		}
	}
	return t
}()

// Normalize returns pixel value p of channel c normalized: (p/255 −
// Mean[c]) / Std[c].
func Normalize(c int, p byte) float32 { return normalized[c][p] }

// NormalizeImage writes img, ImageSize bytes, normalized into dst.
func NormalizeImage(dst []float32, img []byte) {
	for c := range Channels {
		lut := &normalized[c]
		plane := img[c*Side*Side : (c+1)*Side*Side]
		out := dst[c*Side*Side : (c+1)*Side*Side]
		for j, p := range plane {
			out[j] = lut[p]
		}
	}
}

// Features returns the images as features {ImageKey: float32 normalized
// pixels (see Normalize) of shape (N, Channels, Side, Side)}.
func (s *Set) Features() map[string]*tensor.Dense {
	x := make([]float32, len(s.Pixels))
	for i := range s.Len() {
		NormalizeImage(x[i*ImageSize:(i+1)*ImageSize], s.Image(i))
	}
	return map[string]*tensor.Dense{ImageKey: tensor.New(tensor.WithShape(s.Len(), Channels, Side, Side), tensor.WithBacking(x))}
}

// LabelTensors returns the labels as {LabelKey: int64 class ids of shape (N)}.
func (s *Set) LabelTensors() map[string]*tensor.Dense {
	y := make([]int64, len(s.Labels))
	for i, l := range s.Labels {
		y[i] = int64(l)
	}
	return map[string]*tensor.Dense{LabelKey: tensor.New(tensor.WithShape(len(y)), tensor.WithBacking(y))}
}
