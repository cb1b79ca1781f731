package dataset

// A Source of the tf.Examples of TFRecord files.

import (
	"errors"
	"fmt"
	"io"
)

// ExampleReader reads the tf.Examples of TFRecord files one after the
// other, as a Source (what columns.Fit reads, as it reads a CSVReader):
// each file opened as RecordOptions says (AutoCompression chooses by
// each file's name), one record in memory at a time. A decoding error
// names the file, the record and the feature; a damaged record stops
// the reader with its error, unless SkipDamaged. An ExampleReader is not
// safe for concurrent use.
type ExampleReader struct {
	paths []string
	opts  RecordOptions
	f     *RecordFile
	err   error // sticky: the error every later Next returns
}

// NewExampleReader reads files: paths or filepath.Match patterns, each
// pattern's matches in lexical order (a pattern that matches nothing is
// an error, as NewCSVReader's).
func NewExampleReader(files []string, opts RecordOptions) (*ExampleReader, error) {
	paths, err := expandFiles(files)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	return &ExampleReader{paths: paths, opts: opts}, nil
}

// Next returns the next tf.Example, io.EOF after the last file's last.
func (r *ExampleReader) Next() (Example, error) {
	for r.err == nil {
		if r.f == nil {
			if len(r.paths) == 0 {
				r.err = io.EOF
				break
			}
			f, err := OpenRecords(r.paths[0], &r.opts)
			if err != nil {
				r.err = err
				break
			}
			r.f, r.paths = f, r.paths[1:]
		}
		ex, err := r.f.NextExample()
		switch {
		case err == nil:
			return ex, nil
		case errors.Is(err, ErrMalformed):
			return nil, err // the next record is read by the next call
		case err != io.EOF:
			r.err = err
		default:
			err := r.f.Close()
			r.f = nil
			if err != nil {
				r.err = fmt.Errorf("dataset: %w", err)
			}
		}
	}
	return nil, r.err
}

// Close closes the file being read, if any; Next then returns an error.
func (r *ExampleReader) Close() error {
	if r.err == nil || r.err == io.EOF {
		r.err = errReaderClosed
	}
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

var errReaderClosed = errors.New("dataset: ExampleReader: Next after Close")

var _ Source = (*ExampleReader)(nil)
