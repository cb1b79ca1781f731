package layers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"
)

func TestFormatDims(t *testing.T) {
	for _, tc := range []struct {
		f     Format
		shape tensor.Shape
	}{
		{NCHW, tensor.Shape{2, 3, 4, 5}},
		{NHWC, tensor.Shape{2, 4, 5, 3}},
	} {
		n, c, h, w := tc.f.dims(tc.shape)
		if diff := cmp.Diff([]int{2, 3, 4, 5}, []int{n, c, h, w}); diff != "" {
			t.Errorf("%v.dims(%v) (-want +got):\n%s", tc.f, tc.shape, diff)
		}
		if got := tc.f.shape(n, c, h, w); !got.Eq(tc.shape) {
			t.Errorf("%v.shape(%d, %d, %d, %d) = %v, want %v", tc.f, n, c, h, w, got, tc.shape)
		}
	}
}

func TestFormatArg(t *testing.T) {
	for _, tc := range []struct {
		in      []Format
		want    Format
		wantErr bool
	}{
		{nil, NCHW, false},
		{[]Format{NHWC}, NHWC, false},
		{[]Format{NCHW}, NCHW, false},
		{[]Format{Format(7)}, 0, true},
		{[]Format{NHWC, NCHW}, 0, true},
	} {
		got, err := formatArg("op", tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("formatArg(%v) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Format
		wantErr bool
	}{
		{"nchw", NCHW, false},
		{"NHWC", NHWC, false},
		{"nHwC", NHWC, false},
		{"auto", PreferredFormat(), false},
		{"AUTO", PreferredFormat(), false},
		{"", 0, true},
		{"chw", 0, true},
	} {
		got, err := ParseFormat(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
