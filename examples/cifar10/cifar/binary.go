package cifar

import (
	"bytes"
	"fmt"
	"io"
	"slices"
)

// The sizes of CIFAR-10's images and records.
const (
	// Side is the height and width of an image.
	Side = 32
	// Channels is the number of colour channels: red, green, blue.
	Channels = 3
	// ImageSize is the bytes of an image: Channels planes of Side×Side.
	ImageSize = Channels * Side * Side
	// RecordSize is the bytes of a record: the label, then the image.
	RecordSize = 1 + ImageSize
)

// Classes is the number of classes; labels are 0 to Classes−1.
const Classes = 10

// ClassNames are CIFAR-10's classes, by label.
var ClassNames = [Classes]string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}

// Decode reads a file of CIFAR-10 records from r and appends its examples
// to s. name names the file in errors, which also say which record is
// damaged: one cut short, or one whose label is no class.
func Decode(r io.Reader, name string, s *Set) error {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return decode(buf.Bytes(), name, s)
}

// decode appends the records of data, a file's bytes, to s.
func decode(data []byte, name string, s *Set) error {
	n := len(data) / RecordSize
	if cut := len(data) % RecordSize; cut != 0 {
		return fmt.Errorf("%s: record %d is cut after %d of its %d bytes (the file has %d bytes, not a whole number of records)", name, n, cut, RecordSize, len(data))
	}
	for i := range n {
		if l := data[i*RecordSize]; l >= Classes {
			return fmt.Errorf("%s: record %d has label %d, want 0 to %d", name, i, l, Classes-1)
		}
	}
	s.Labels = slices.Grow(s.Labels, n)
	s.Pixels = slices.Grow(s.Pixels, n*ImageSize)
	for i := range n {
		rec := data[i*RecordSize : (i+1)*RecordSize]
		s.Labels = append(s.Labels, rec[0])
		s.Pixels = append(s.Pixels, rec[1:]...)
	}
	return nil
}

// Encode writes s as CIFAR-10 records.
func Encode(w io.Writer, s *Set) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("encode CIFAR-10: %w", err)
	}
	out := make([]byte, s.Len()*RecordSize)
	for i, l := range s.Labels {
		rec := out[i*RecordSize : (i+1)*RecordSize]
		rec[0] = l
		copy(rec[1:], s.Pixels[i*ImageSize:(i+1)*ImageSize])
	}
	_, err := w.Write(out)
	return err
}
