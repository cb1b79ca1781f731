package mnist

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/fsutil"
)

// The keys of the examples' feature and label in a batch, and of the
// served model's input.
const (
	ImageKey = "image"
	LabelKey = "label"
)

// Split is one of the data set's two parts, named as its files begin.
type Split string

// MNIST's 60,000 training and 10,000 test examples.
const (
	Train Split = "train"
	Test  Split = "t10k"
)

// ImagesFile is the name of the split's images file, without ".gz".
func (s Split) ImagesFile() string { return string(s) + "-images-idx3-ubyte" }

// LabelsFile is the name of the split's labels file, without ".gz".
func (s Split) LabelsFile() string { return string(s) + "-labels-idx1-ubyte" }

// Set is a split's examples: images of Rows×Cols pixels, one byte each
// (0 background, 255 ink), row-major, image after image, and a label 0..9
// per image.
type Set struct {
	Rows, Cols int
	Pixels     []byte
	Labels     []byte
}

// Len returns the number of examples.
func (s *Set) Len() int { return len(s.Labels) }

// Layout is the shape in which a model takes its images.
type Layout int

const (
	// Flat images: (N, Rows·Cols), as a multilayer perceptron takes them.
	Flat Layout = iota
	// NCHW images of one channel: (N, 1, Rows, Cols), as a convolution
	// takes them.
	NCHW
)

// Shape returns the shape of one image of rows×cols pixels.
func (l Layout) Shape(rows, cols int) tensor.Shape {
	if l == NCHW {
		return tensor.Shape{1, rows, cols}
	}
	return tensor.Shape{rows * cols}
}

// String returns "flat" or "NCHW".
func (l Layout) String() string {
	if l == NCHW {
		return "NCHW"
	}
	return "flat"
}

// Features returns the images as features {ImageKey: float32 pixels scaled
// to [0, 1]} of shape (N, l.Shape(Rows, Cols)...).
func (s *Set) Features(l Layout) map[string]*tensor.Dense {
	x := make([]float32, len(s.Pixels))
	for i, p := range s.Pixels {
		x[i] = float32(p) / 255
	}
	shape := append(tensor.Shape{s.Len()}, l.Shape(s.Rows, s.Cols)...)
	return map[string]*tensor.Dense{ImageKey: tensor.New(tensor.WithShape(shape...), tensor.WithBacking(x))}
}

// LabelTensors returns the labels as {LabelKey: int64 class ids of shape (N)}.
func (s *Set) LabelTensors() map[string]*tensor.Dense {
	y := make([]int64, len(s.Labels))
	for i, l := range s.Labels {
		y[i] = int64(l)
	}
	return map[string]*tensor.Dense{LabelKey: tensor.New(tensor.WithShape(len(y)), tensor.WithBacking(y))}
}

// Read reads a split from dir: its images and labels files, each plain
// (NAME) or, when there is none, gzipped (NAME.gz). It checks the files'
// magic numbers and lengths, that every label is a digit and that the
// files have as many images as labels; errors name the file and, for a
// damaged example, its index.
func Read(dir string, split Split) (*Set, error) {
	var s Set
	images, err := readFile(dir, split.ImagesFile(), func(r io.Reader, name string) (err error) {
		s.Rows, s.Cols, s.Pixels, err = DecodeImages(r, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	labels, err := readFile(dir, split.LabelsFile(), func(r io.Reader, name string) (err error) {
		s.Labels, err = DecodeLabels(r, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	if n := len(s.Pixels) / (s.Rows * s.Cols); n != len(s.Labels) {
		return nil, fmt.Errorf("%s has %d images but %s has %d labels", images, n, labels, len(s.Labels))
	}
	return &s, nil
}

// Load reads the training and test splits from dir (see Read), whose
// images must have the same size.
func Load(dir string) (train, test *Set, err error) {
	if train, err = Read(dir, Train); err != nil {
		return nil, nil, err
	}
	if test, err = Read(dir, Test); err != nil {
		return nil, nil, err
	}
	if train.Rows != test.Rows || train.Cols != test.Cols {
		return nil, nil, fmt.Errorf("%s: the training images have %d×%d pixels, the test images %d×%d", dir, train.Rows, train.Cols, test.Rows, test.Cols)
	}
	return train, test, nil
}

// readFile opens dir/name, or dir/name.gz when there is no dir/name, and
// decodes it with decode; it returns the path it read.
func readFile(dir, name string, decode func(r io.Reader, path string) error) (string, error) {
	path := filepath.Join(dir, name)
	f, _, err := fsutil.OpenRegular(dir, name)
	if errors.Is(err, fs.ErrNotExist) {
		path += ".gz"
		f, _, err = fsutil.OpenRegular(dir, name+".gz")
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: neither %s nor %s.gz is there", dir, name, name)
		}
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	return path, decode(f, path)
}

// Write writes s into dir as split's images and labels files, gzipped
// (NAME.gz) when gz is set.
func Write(dir string, split Split, s *Set, gz bool) error {
	if s.Rows < 1 || s.Cols < 1 || len(s.Pixels) != s.Len()*s.Rows*s.Cols {
		return fmt.Errorf("write %s: %d pixels are not %d images of %d×%d", split, len(s.Pixels), s.Len(), s.Rows, s.Cols)
	}
	suffix := ""
	if gz {
		suffix = ".gz"
	}
	if err := writeFile(filepath.Join(dir, split.ImagesFile()+suffix), func(w io.Writer) error {
		return EncodeImages(w, s.Rows, s.Cols, s.Pixels)
	}); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, split.LabelsFile()+suffix), func(w io.Writer) error {
		return EncodeLabels(w, s.Labels)
	})
}
