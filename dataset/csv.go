package dataset

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Source is a stream of Examples, one a call: Next returns io.EOF after
// the last. CSVReader is one.
type Source interface {
	Next() (Example, error)
}

// CSVOptions says how to read CSV files. Its zero value, given a Schema,
// reads comma-separated files with a header row.
type CSVOptions struct {
	// Schema is every column of the files, in order. With a header row,
	// the header must name the same columns in the same order.
	Schema Schema
	// Comma is the field delimiter; 0 is ','.
	Comma rune
	// Comment, if not 0, starts a comment line, which is skipped (it
	// still counts in line numbers).
	Comment rune
	// NoHeader says the files have no header row: their first line is
	// data, and the columns' names are the schema's.
	NoHeader bool
	// Columns are the names of the columns an Example holds; nil holds
	// every column of the schema. The values of other columns are not
	// parsed (a row must still have every column of the schema).
	//
	// An Example does not tell features from labels: the input pipeline
	// splits them by name, the same for CSV rows and tf.Examples.
	Columns []string
	// ReuseExample makes Next return the same Example, its values
	// overwritten, every call: no allocation a row but encoding/csv's
	// one, and rows about half as costly, but an Example is valid only
	// until the next call (as csv.Reader's ReuseRecord). Copy what must
	// outlive it, and do not change it.
	ReuseExample bool
}

// CSVError is an error in a CSV file: a malformed row, a value its
// column cannot hold, a missing value, a header that does not match the
// schema.
type CSVError struct {
	File string
	// Line is the line of the file, counting from 1 as a text editor
	// does: the header, comment lines and every line of a quoted field
	// with newlines count.
	Line int
	// Column is the column's number, from 1; 0 when the error concerns
	// the whole row. Name is its name in the schema.
	Column int
	Name   string
	Err    error
}

func (e *CSVError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	switch {
	case e.Column > 0 && e.Name != "":
		fmt.Fprintf(&b, "column %q (%d): ", e.Name, e.Column)
	case e.Column > 0:
		fmt.Fprintf(&b, "column %d: ", e.Column)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *CSVError) Unwrap() error { return e.Err }

// ErrMissing is what an empty value in a column that is not Optional
// wraps.
var ErrMissing = errors.New("empty value, and the column is not Optional")

// CSVReader reads Examples from CSV files (RFC 4180, through
// encoding/csv), one row at a time: its memory is a row's, whatever the
// size of the files. A row becomes an Example holding the selected
// columns, each a Feature of one value of its column's kind.
//
// Errors concerning a row are *CSVError; after one, Next goes on with
// the next row. An error opening or reading a file, or a header that does
// not match the schema, ends the stream: Next returns it again.
//
// Position and Seek save and restore where it is, to resume exactly.
// A CSVReader is a Source; one goroutine at a time may use it.
type CSVReader struct {
	files []string
	opts  CSVOptions
	cols  []column
	sel   []int // the schema's indices of the selected columns

	nInt, nFloat, nBytes int

	fi int // the file being read, or next to be opened
	f  io.ReadCloser
	cr *csv.Reader
	// cr began reading at byte base of the file, after line lineBase.
	base     int64
	lineBase int
	err      error // sticky
	closed   bool

	// openFile opens a file: os.Open, but for tests.
	openFile func(name string) (io.ReadCloser, error)

	// Where new Examples' values come from (carve).
	intSlab   []int64
	floatSlab []float32
	bytesSlab [][]byte
	bufSlab   []byte

	// Reused when opts.ReuseExample.
	ex     Example
	ints   []int64
	floats []float32
	strs   [][]byte
	buf    []byte
}

// NewCSVReader reads files in order. Each of files is a path or a
// filepath.Match pattern, whose matches are read in lexical order; a
// pattern that matches no file, and a file named twice, are errors.
// Files are opened one at a time, as Next reaches them; Close closes the
// one open.
func NewCSVReader(files []string, opts CSVOptions) (*CSVReader, error) {
	paths, err := expandFiles(files)
	if err != nil {
		return nil, err
	}
	return newCSVReader(paths, opts, openFile)
}

// newCSVReader is NewCSVReader of paths, each opened by open.
func newCSVReader(paths []string, opts CSVOptions, open func(string) (io.ReadCloser, error)) (*CSVReader, error) {
	if err := checkDelimiters(opts); err != nil {
		return nil, err
	}
	cols, err := opts.Schema.compile()
	if err != nil {
		return nil, err
	}
	r := &CSVReader{files: paths, opts: opts, cols: cols, openFile: open}
	if opts.Columns == nil {
		for i := range cols {
			r.sel = append(r.sel, i)
		}
	} else {
		index := make(map[string]int, len(cols))
		for i, c := range cols {
			index[c.Name] = i
		}
		chosen := make(map[string]bool, len(opts.Columns))
		for _, name := range opts.Columns {
			i, ok := index[name]
			if !ok {
				return nil, fmt.Errorf("column %q selected, and the schema has no such column", name)
			}
			if chosen[name] {
				return nil, fmt.Errorf("column %q selected twice", name)
			}
			chosen[name] = true
			r.sel = append(r.sel, i)
		}
		if len(r.sel) == 0 {
			return nil, errors.New("no column selected (Columns is empty, not nil)")
		}
	}
	for _, i := range r.sel {
		switch cols[i].Kind {
		case KindInt64:
			r.nInt++
		case KindFloat:
			r.nFloat++
		case KindBytes:
			r.nBytes++
		}
	}
	return r, nil
}

func checkDelimiters(opts CSVOptions) error {
	// encoding/csv checks these when it reads; checked here they fail
	// before any file is opened.
	comma := opts.Comma
	if comma == 0 {
		comma = ','
	}
	w := csv.NewReader(strings.NewReader(""))
	w.Comma, w.Comment = comma, opts.Comment
	if _, err := w.Read(); err != io.EOF {
		return fmt.Errorf("delimiter %q, comment %q: %w", comma, opts.Comment, err)
	}
	return nil
}

// expandFiles expands the patterns in files, each in lexical order.
func expandFiles(files []string) ([]string, error) {
	if len(files) == 0 {
		return nil, errors.New("no files given")
	}
	var paths []string
	seen := make(map[string]bool)
	for _, pattern := range files {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("file pattern %q: %w", pattern, err)
		}
		if len(matches) == 0 {
			if _, err := os.Lstat(pattern); err != nil && !strings.ContainsAny(pattern, `*?[\`) {
				return nil, err // a path: why it is not there
			}
			return nil, fmt.Errorf("file pattern %q matches no file", pattern)
		}
		for _, m := range matches {
			if seen[m] {
				return nil, fmt.Errorf("file %s named twice (by %q and before)", m, pattern)
			}
			seen[m] = true
			paths = append(paths, m)
		}
	}
	return paths, nil
}

var _ Source = (*CSVReader)(nil)

// Files is the files the reader reads, patterns expanded, in order.
func (r *CSVReader) Files() []string { return append([]string(nil), r.files...) }

// Next returns the next row's Example, io.EOF after the last row of the
// last file.
func (r *CSVReader) Next() (Example, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		if r.cr == nil {
			if r.fi == len(r.files) {
				return nil, io.EOF
			}
			if err := r.open(0); err != nil {
				r.err = err
				return nil, err
			}
		}
		rec, err := r.cr.Read()
		if err == io.EOF {
			if err := r.closeFile(); err != nil {
				r.err = err
				return nil, err
			}
			r.fi++
			continue
		}
		if err != nil {
			return nil, r.readError(err)
		}
		return r.example(rec)
	}
}

// lastLine is the line (from 1) on which the row Next last returned
// starts, in the file it came from; 0 when no file is open. Call it only
// after Next returned a row.
func (r *CSVReader) lastLine() int {
	if r.cr == nil {
		return 0
	}
	line, _ := r.cr.FieldPos(0)
	return r.lineBase + line
}

// Close closes the file open, if any; Next then returns an error.
func (r *CSVReader) Close() error {
	err := r.closeFile()
	r.closed = true
	r.err = errClosed
	return err
}

var errClosed = errors.New("dataset: CSVReader closed")

// CSVPosition is a place in a CSVReader's files: byte Offset of file
// File, an index into its Files. A position is that of a row's start or
// of a file's end; the position File == len(Files()), Offset 0, is the
// end of the last file.
type CSVPosition struct {
	File   int
	Offset int64
}

// Position is where the next row Next reads starts (or the end of the
// file, after its last row): save it to go on later from there by Seek,
// on a reader of the same files and options. After an error ending the
// stream it says where the reader stopped.
func (r *CSVReader) Position() CSVPosition {
	if r.cr == nil {
		return CSVPosition{File: r.fi}
	}
	return CSVPosition{File: r.fi, Offset: r.base + r.cr.InputOffset()}
}

// Seek makes Next go on from pos, a position Position returned on a
// reader of the same files and options: Next then returns the rows from
// there, and the same errors, line numbers included, as a reader that
// read the files up to pos. Seek checks the file's header and reads the
// file up to pos to count its lines. It does not tell a position inside
// a row from a row's start: such a position reads the rest of the row
// as a row. After an error, Next returns it until a Seek succeeds.
func (r *CSVReader) Seek(pos CSVPosition) error {
	if r.closed {
		return errClosed
	}
	if pos.File < 0 || pos.File > len(r.files) || pos.Offset < 0 || pos.File == len(r.files) && pos.Offset != 0 {
		r.err = fmt.Errorf("position %+v is not in the %d files", pos, len(r.files))
		return r.err
	}
	if err := r.closeFile(); err != nil {
		r.err = err
		return err
	}
	r.err = nil
	r.fi = pos.File
	if pos.Offset == 0 {
		return nil // Next opens the file, as it opens the first
	}
	if err := r.open(pos.Offset); err != nil {
		r.err = err
		return err
	}
	return nil
}

func (r *CSVReader) closeFile() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f, r.cr = nil, nil
	if err != nil {
		return fmt.Errorf("%s: %w", r.files[r.fi], err)
	}
	return nil
}

// open opens r.files[r.fi], reads its header, and goes on to offset,
// counting the lines before it.
func (r *CSVReader) open(offset int64) error {
	name := r.files[r.fi]
	f, err := r.openFile(name)
	if err != nil {
		return err
	}
	r.f = f
	r.cr, r.base, r.lineBase = newRowReader(f, r.opts), 0, 0
	if !r.opts.NoHeader {
		if err := checkHeader(name, r.cr, r.cols); err != nil {
			return err
		}
	}
	if offset == 0 {
		return nil
	}
	if start := r.cr.InputOffset(); offset < start {
		return fmt.Errorf("%s: offset %d is inside the header, which ends at %d", name, offset, start)
	}
	seeker, ok := f.(io.Seeker)
	if !ok {
		return fmt.Errorf("%s: cannot seek in it", name)
	}
	if _, err := seeker.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	lines, err := countLines(f, offset)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	r.cr, r.base, r.lineBase = newRowReader(f, r.opts), offset, lines
	return nil
}

// countLines reads n bytes of f and counts the newlines in them.
func countLines(f io.Reader, n int64) (int, error) {
	buf := make([]byte, 1<<16)
	lines := 0
	for left := n; left > 0; {
		m, err := io.ReadFull(f, buf[:min(left, int64(len(buf)))])
		lines += bytes.Count(buf[:m], []byte{'\n'})
		left -= int64(m)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return 0, fmt.Errorf("offset %d is beyond the end of the file (%d bytes)", n, n-left)
		}
		if err != nil {
			return 0, err
		}
	}
	return lines, nil
}

func openFile(name string) (io.ReadCloser, error) { return os.Open(name) }

func newRowReader(f io.Reader, opts CSVOptions) *csv.Reader {
	cr := csv.NewReader(bufio.NewReaderSize(f, 1<<16))
	if opts.Comma != 0 {
		cr.Comma = opts.Comma
	}
	cr.Comment = opts.Comment
	cr.FieldsPerRecord = -1 // the reader checks, naming the columns
	cr.ReuseRecord = true
	return cr
}

// readHeader reads the header row of the file name, a UTF-8 byte order
// mark dropped.
func readHeader(name string, cr *csv.Reader) ([]string, error) {
	rec, err := cr.Read()
	if err == io.EOF {
		return nil, &CSVError{File: name, Err: errors.New("empty file: no header row (CSVOptions.NoHeader is false)")}
	}
	if err != nil {
		return nil, csvReadError(name, err, 0)
	}
	rec[0] = strings.TrimPrefix(rec[0], "\uFEFF")
	return rec, nil
}

func checkHeader(name string, cr *csv.Reader, cols []column) error {
	header, err := readHeader(name, cr)
	if err != nil {
		return err
	}
	line, _ := cr.FieldPos(0)
	return compareHeader(name, line, header, columnNames(cols), "the schema")
}

// compareHeader is an error, on line of the file name, when header is
// not want, the names in whose (the schema, or another file).
func compareHeader(name string, line int, header, want []string, whose string) error {
	if len(header) != len(want) {
		return &CSVError{File: name, Line: line, Err: fmt.Errorf("the header has %d columns %s, %s %d %s",
			len(header), columnList(header), whose, len(want), columnList(want))}
	}
	for i, h := range header {
		if h != want[i] {
			return &CSVError{File: name, Line: line, Column: i + 1,
				Err: fmt.Errorf("named %q in the header, %q in %s", h, want[i], whose)}
		}
	}
	return nil
}

func columnNames(cols []column) []string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return names
}

// columnList is names as (a, b, c), at most a dozen of them.
func columnList(names []string) string {
	const most = 12
	quoted := make([]string, 0, most+1)
	for i, n := range names {
		if i == most {
			quoted = append(quoted, fmt.Sprintf("... %d more", len(names)-most))
			break
		}
		quoted = append(quoted, fmt.Sprintf("%q", n))
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}

func (r *CSVReader) readError(err error) error {
	err = csvReadError(r.files[r.fi], err, r.lineBase)
	var ce *CSVError
	if !errors.As(err, &ce) {
		r.err = err // an I/O error: the stream ends
	}
	return err
}

// csvReadError is err, from csv.Reader.Read on the file name, naming the
// file and line.
func csvReadError(name string, err error, lineBase int) error {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", name, err)
	}
	where := fmt.Sprintf("character %d of the line", pe.Column)
	if pe.StartLine != pe.Line {
		where += fmt.Sprintf("; the row starts on line %d", lineBase+pe.StartLine)
	}
	return &CSVError{File: name, Line: lineBase + pe.Line, Err: fmt.Errorf("%w (%s)", pe.Err, where)}
}

// example is the row rec as an Example.
func (r *CSVReader) example(rec []string) (Example, error) {
	name := r.files[r.fi]
	if len(rec) != len(r.cols) {
		line, _ := r.cr.FieldPos(0)
		line += r.lineBase
		return nil, &CSVError{File: name, Line: line,
			Err: fmt.Errorf("%d columns, the schema has %d %s", len(rec), len(r.cols), columnList(columnNames(r.cols)))}
	}
	// The values: one slice of each kind for the row, each Feature a
	// one-value window on it.
	bytesLen := 0
	for _, i := range r.sel {
		if r.cols[i].Kind == KindBytes {
			if v := rec[i]; v != "" {
				bytesLen += len(v)
			} else {
				bytesLen += len(r.cols[i].Default)
			}
		}
	}
	ex, ints, floats, strs, buf := r.ex, r.ints, r.floats, r.strs, r.buf
	if ex == nil || !r.opts.ReuseExample {
		// A new Example's values are carved out of slabs shared by the
		// next rows' Examples: four allocations every slabRows rows
		// rather than four a row.
		ex = make(Example, len(r.sel))
		ints = carve(&r.intSlab, r.nInt, slabRows*r.nInt)
		floats = carve(&r.floatSlab, r.nFloat, slabRows*r.nFloat)
		strs = carve(&r.bytesSlab, r.nBytes, slabRows*r.nBytes)
		buf = carve(&r.bufSlab, bytesLen, slabBytes)
	} else if cap(buf) < bytesLen {
		buf = make([]byte, 0, bytesLen)
	}
	buf = buf[:0]
	var ni, nf, nb int
	for _, i := range r.sel {
		c := &r.cols[i]
		v := rec[i]
		if v == "" && !c.Optional {
			return nil, r.valueError(i, ErrMissing)
		}
		switch c.Kind {
		case KindInt64:
			x := c.defInt
			if v != "" {
				var err error
				if x, err = parseInt(v); err != nil {
					return nil, r.valueError(i, err)
				}
			}
			ints[ni] = x
			ex[c.Name] = Feature{Int64s: ints[ni : ni+1 : ni+1]}
			ni++
		case KindFloat:
			x := c.defFloat
			if v != "" {
				var err error
				if x, err = parseFloat(v); err != nil {
					return nil, r.valueError(i, err)
				}
			}
			floats[nf] = x
			ex[c.Name] = Feature{Floats: floats[nf : nf+1 : nf+1]}
			nf++
		case KindBytes:
			if v == "" {
				v = c.Default
			}
			start := len(buf)
			buf = append(buf, v...)
			strs[nb] = buf[start:len(buf):len(buf)]
			ex[c.Name] = Feature{Bytes: strs[nb : nb+1 : nb+1]}
			nb++
		}
	}
	if r.opts.ReuseExample {
		r.ex, r.ints, r.floats, r.strs, r.buf = ex, ints, floats, strs, buf
	}
	return ex, nil
}

// An Example's values are windows on slabs of slabRows rows' values, or
// slabBytes bytes of strings, which the rows share.
const (
	slabRows  = 64
	slabBytes = 1 << 14
)

// carve cuts n elements off the front of *slab, making a new slab of
// max(n, size) elements when it has too few.
func carve[T any](slab *[]T, n, size int) []T {
	if *slab == nil || len(*slab) < n {
		*slab = make([]T, max(n, size))
	}
	s := (*slab)[:n:n]
	*slab = (*slab)[n:]
	return s
}

func (r *CSVReader) valueError(i int, err error) error {
	line, _ := r.cr.FieldPos(i)
	line += r.lineBase
	return &CSVError{File: r.files[r.fi], Line: line, Column: i + 1, Name: r.cols[i].Name, Err: err}
}
