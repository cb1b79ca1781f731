package layers

import (
	"fmt"
	"strings"

	"gorgonia.org/tensor"
)

// Format is the order of the dimensions of a batch of images: where the
// channels are. The zero value is NCHW.
//
// The layers that see images (Conv2D, BatchNorm of 4-D inputs, the
// poolings) take the batch in either order and give their output in the
// same order; a model keeps one order throughout. A convolution's kernel
// is (F, C, KH, KW) in both, and batch norm's variables are per channel,
// so their variables, and checkpoints of them, are the same in either
// order. What flattens images into features does depend on it: after
// Flatten or Reshape of (N, C, H, W) a dense layer's kernel rows are
// features in (C, H, W) order, of (N, H, W, C) in (H, W, C) order, and a
// checkpoint of one order loads into the other without an error but does
// not compute the same. A global pooling gives (N, C) in both.
type Format int

const (
	// NCHW is channels first: (N, C, H, W), gorgonia's and PyTorch's
	// order.
	NCHW Format = iota
	// NHWC is channels last: (N, H, W, C), TensorFlow's default order
	// (data_format "channels_last"). With oneDNN's convolutions (-tags
	// dnnl) it is the faster order: they compute on NHWC in place, where
	// NCHW batches are reordered into oneDNN's blocked layout and back on
	// every pass.
	NHWC
)

func (f Format) String() string {
	switch f {
	case NCHW:
		return "NCHW"
	case NHWC:
		return "NHWC"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// check says whether f is a known order.
func (f Format) check() error {
	if f != NCHW && f != NHWC {
		return fmt.Errorf("unknown data format %v (want NCHW or NHWC)", f)
	}
	return nil
}

// dims returns the batch, channels, height and width of a 4-D shape s in
// order f.
func (f Format) dims(s tensor.Shape) (n, c, h, w int) {
	if f == NHWC {
		return s[0], s[3], s[1], s[2]
	}
	return s[0], s[1], s[2], s[3]
}

// shape returns the 4-D shape of n images of c channels of h×w in order f.
func (f Format) shape(n, c, h, w int) tensor.Shape {
	if f == NHWC {
		return tensor.Shape{n, h, w, c}
	}
	return tensor.Shape{n, c, h, w}
}

// want names the dimensions of f for error messages.
func (f Format) want() string {
	if f == NHWC {
		return "(N, H, W, C)"
	}
	return "(N, C, H, W)"
}

// formatArg returns the one Format of an optional argument, NCHW if none.
func formatArg(op string, fs []Format) (Format, error) {
	switch len(fs) {
	case 0:
		return NCHW, nil
	case 1:
		if err := fs[0].check(); err != nil {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
		return fs[0], nil
	}
	return 0, fmt.Errorf("%s: %d formats given, want at most one", op, len(fs))
}

// PreferredFormat returns the order in which this build computes float32
// convolutions fastest: NHWC where they run in oneDNN (a build with -tags
// dnnl, unless UseOneDNN(false)), NCHW in this package's own code, which
// computes NHWC by reordering around its NCHW kernels. A model free to
// choose its order can take this one (see Format for what changes with it).
func PreferredFormat() Format {
	if oneDNN.Load() {
		return NHWC
	}
	return NCHW
}

// ParseFormat returns the Format s names, in any case: "NCHW", "NHWC", or
// "auto" for PreferredFormat (as it is when called: after any UseOneDNN).
func ParseFormat(s string) (Format, error) {
	if strings.EqualFold(s, "auto") {
		return PreferredFormat(), nil
	}
	for _, f := range []Format{NCHW, NHWC} {
		if strings.EqualFold(s, f.String()) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown data format %q (want nchw, nhwc or auto)", s)
}
