package dataset

import (
	"fmt"
	"io"
	"os"
	"strconv"
)

// InferCSVSchema reads the first rows rows of files (their data rows, in
// order, as NewCSVReader would) and returns the schema of the narrowest
// kinds every sampled value fits: KindInt64 when every value is an
// integer, else KindFloat when every value is a number that a float32
// holds, else KindBytes. Empty values do not decide a kind; a column
// with an empty value in the sample is Optional (its Default the
// kind's zero), and one with nothing but empty values is KindBytes.
// A value after the sample may still not fit: NewCSVReader's reader
// then says so, naming its line.
//
// It uses opts' Comma, Comment and NoHeader. With a header, the columns
// are named as in the first file's header, and every sampled file's
// header must be the same; without one they are named column1,
// column2, ... Print the schema (Schema.String) to paste it into code,
// and rename or change what the sample could not tell.
func InferCSVSchema(files []string, opts CSVOptions, rows int) (Schema, error) {
	if rows <= 0 {
		return nil, fmt.Errorf("InferCSVSchema: %d rows to sample; at least 1", rows)
	}
	paths, err := expandFiles(files)
	if err != nil {
		return nil, err
	}
	if err := checkDelimiters(opts); err != nil {
		return nil, err
	}
	var inf inference
	for _, name := range paths {
		if inf.rows == rows {
			break
		}
		if err := inf.sampleFile(name, opts, rows); err != nil {
			return nil, err
		}
	}
	if inf.rows == 0 {
		return nil, fmt.Errorf("%s: no data rows to infer a schema from", paths[len(paths)-1])
	}
	s := make(Schema, len(inf.names))
	for j, name := range inf.names {
		k := inf.kinds[j]
		if !inf.sawValue[j] {
			k = KindBytes
		}
		s[j] = Column{Name: name, Kind: k, Optional: inf.sawEmpty[j]}
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: the header: %w", inf.namesFrom, err)
	}
	return s, nil
}

// inference is what the sample has shown so far.
type inference struct {
	names     []string
	namesFrom string // the file that named the columns
	kinds     []Kind // the narrowest kind every value so far fits
	sawValue  []bool
	sawEmpty  []bool
	rows      int
}

func (inf *inference) sampleFile(name string, opts CSVOptions, rows int) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := newRowReader(f, opts)
	if !opts.NoHeader {
		header, err := readHeader(name, cr)
		if err != nil {
			return err
		}
		if inf.names == nil {
			inf.setColumns(append([]string(nil), header...), name)
		} else {
			line, _ := cr.FieldPos(0)
			if err := compareHeader(name, line, header, inf.names, inf.namesFrom+"'s"); err != nil {
				return err
			}
		}
	}
	for inf.rows < rows {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return csvReadError(name, err, 0)
		}
		if inf.names == nil {
			names := make([]string, len(rec))
			for j := range names {
				names[j] = "column" + strconv.Itoa(j+1)
			}
			inf.setColumns(names, name)
		}
		if len(rec) != len(inf.names) {
			line, _ := cr.FieldPos(0)
			return &CSVError{File: name, Line: line,
				Err: fmt.Errorf("%d columns, %d before %s", len(rec), len(inf.names), columnList(inf.names))}
		}
		for j, v := range rec {
			inf.see(j, v)
		}
		inf.rows++
	}
	return nil
}

func (inf *inference) setColumns(names []string, from string) {
	inf.names, inf.namesFrom = names, from
	inf.kinds = make([]Kind, len(names))
	for j := range inf.kinds {
		inf.kinds[j] = KindInt64
	}
	inf.sawValue = make([]bool, len(names))
	inf.sawEmpty = make([]bool, len(names))
}

// see narrows column j's kind to one that v fits too.
func (inf *inference) see(j int, v string) {
	if v == "" {
		inf.sawEmpty[j] = true
		return
	}
	inf.sawValue[j] = true
	if inf.kinds[j] == KindInt64 {
		if _, err := parseInt(v); err == nil {
			return
		}
		inf.kinds[j] = KindFloat
	}
	if inf.kinds[j] == KindFloat {
		if _, err := parseFloat(v); err == nil {
			return
		}
		inf.kinds[j] = KindBytes
	}
}
