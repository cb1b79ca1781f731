package dataset

import (
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeFiles writes files (name: contents) into a new directory and
// returns it.
func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// readCSV reads every row of files in dir, going on past row errors: the
// Examples read, and the errors' texts, the directory dropped from them.
func readCSV(t *testing.T, dir string, files []string, opts CSVOptions) ([]Example, []string) {
	t.Helper()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f)
	}
	r, err := NewCSVReader(paths, opts)
	if err != nil {
		return nil, []string{strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")}
	}
	defer r.Close()
	var exs []Example
	var errs []string
	var last error
	for {
		ex, err := r.Next()
		switch {
		case err == io.EOF:
			return exs, errs
		case err != nil && err == last:
			return exs, errs // the stream ended at it
		case err != nil:
			errs = append(errs, strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""))
			last = err
			continue
		}
		if opts.ReuseExample {
			ex = copyExample(ex)
		}
		exs = append(exs, ex)
	}
}

func copyExample(ex Example) Example {
	c := make(Example, len(ex))
	for k, f := range ex {
		var g Feature
		if f.Int64s != nil {
			g.Int64s = append([]int64{}, f.Int64s...)
		}
		if f.Floats != nil {
			g.Floats = append([]float32{}, f.Floats...)
		}
		if f.Bytes != nil {
			g.Bytes = [][]byte{}
			for _, b := range f.Bytes {
				g.Bytes = append(g.Bytes, append([]byte{}, b...))
			}
		}
		c[k] = g
	}
	return c
}

func i64(v int64) Feature   { return Feature{Int64s: []int64{v}} }
func f32(v float32) Feature { return Feature{Floats: []float32{v}} }
func str(v string) Feature  { return Feature{Bytes: [][]byte{[]byte(v)}} }

var people = Schema{
	{Name: "id", Kind: KindInt64},
	{Name: "age", Kind: KindFloat},
	{Name: "name", Kind: KindBytes},
}

func TestCSVReader(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name  string
		files map[string]string
		read  []string // files to read, patterns allowed; nil: "data.csv"
		opts  CSVOptions
		want  []Example
		errs  []string
	}{{
		name:  "header and three kinds",
		files: map[string]string{"data.csv": "id,age,name\n1,2.5,ann\n-2,1e3,bob\n"},
		opts:  CSVOptions{Schema: people},
		want: []Example{
			{"id": i64(1), "age": f32(2.5), "name": str("ann")},
			{"id": i64(-2), "age": f32(1000), "name": str("bob")},
		},
	}, {
		name: "quoted fields: delimiters, quotes and newlines inside",
		files: map[string]string{"data.csv": "id,age,name\n" +
			"1,2,\"a, \"\"quoted\"\"\nname\"\n" +
			"2,3,\"two\n\nlines\"\n" +
			"3,x,c\n"},
		opts: CSVOptions{Schema: people},
		want: []Example{
			{"id": i64(1), "age": f32(2), "name": str("a, \"quoted\"\nname")},
			{"id": i64(2), "age": f32(3), "name": str("two\n\nlines")},
		},
		errs: []string{`data.csv:7: column "age" (2): "x" is not a number`},
	}, {
		name:  "a value on a later line of its row names its line",
		files: map[string]string{"data.csv": "name,age,id\n\"a\nb\",2,1\n\"c\n\nd\",4,x\n\"3\n\",4,\"5\n\"\n"},
		opts:  CSVOptions{Schema: Schema{{Name: "name", Kind: KindBytes}, {Name: "age", Kind: KindFloat}, {Name: "id", Kind: KindInt64}}},
		want:  []Example{{"id": i64(1), "age": f32(2), "name": str("a\nb")}},
		errs: []string{
			`data.csv:6: column "id" (3): "x" is not an integer`,
			`data.csv:8: column "id" (3): "5\n" is not an integer`,
		},
	}, {
		name:  "semicolons, comments and blank lines, which count as lines",
		files: map[string]string{"data.csv": "# people\nid;age;name\n\n1;2,5;a,b\n# more\n2;3;c\n4;y;d\n"},
		opts:  CSVOptions{Schema: people, Comma: ';', Comment: '#'},
		want:  []Example{{"id": i64(2), "age": f32(3), "name": str("c")}},
		errs: []string{
			`data.csv:4: column "age" (2): "2,5" is not a number`,
			`data.csv:7: column "age" (2): "y" is not a number`,
		},
	}, {
		name:  "tabs, no header",
		files: map[string]string{"data.tsv": "1\t2\tx y\n"},
		read:  []string{"data.tsv"},
		opts:  CSVOptions{Schema: people, Comma: '\t', NoHeader: true},
		want:  []Example{{"id": i64(1), "age": f32(2), "name": str("x y")}},
	}, {
		name:  "a byte order mark before the header",
		files: map[string]string{"data.csv": "\uFEFFid,age,name\n1,2,a\n"},
		opts:  CSVOptions{Schema: people},
		want:  []Example{{"id": i64(1), "age": f32(2), "name": str("a")}},
	}, {
		name:  "defaults and missing values",
		files: map[string]string{"data.csv": "a,b,c,d,e\n,,,,1\n7,,x,\"\",\n"},
		opts: CSVOptions{Schema: Schema{
			{Name: "a", Kind: KindInt64, Optional: true, Default: "-1"},
			{Name: "b", Kind: KindFloat, Optional: true, Default: "NaN"},
			{Name: "c", Kind: KindBytes, Optional: true, Default: "none"},
			{Name: "d", Kind: KindFloat, Optional: true},
			{Name: "e", Kind: KindInt64},
		}},
		want: []Example{{"a": i64(-1), "b": f32(nan), "c": str("none"), "d": f32(0), "e": i64(1)}},
		errs: []string{`data.csv:3: column "e" (5): empty value, and the column is not Optional`},
	}, {
		name:  "an empty string where a string column is not Optional",
		files: map[string]string{"data.csv": "id,age,name\n1,2,\n"},
		opts:  CSVOptions{Schema: people},
		errs:  []string{`data.csv:2: column "name" (3): empty value, and the column is not Optional`},
	}, {
		name:  "too many and too few columns",
		files: map[string]string{"data.csv": "id,age,name\n1,2,a,extra\n2,3\n3,4,c\n"},
		opts:  CSVOptions{Schema: people},
		want:  []Example{{"id": i64(3), "age": f32(4), "name": str("c")}},
		errs: []string{
			`data.csv:2: 4 columns, the schema has 3 ("id", "age", "name")`,
			`data.csv:3: 2 columns, the schema has 3 ("id", "age", "name")`,
		},
	}, {
		name:  "numbers out of range",
		files: map[string]string{"data.csv": "id,age,name\n9223372036854775808,1,a\n1,1e39,b\n9223372036854775807,-3.4e38,c\n"},
		opts:  CSVOptions{Schema: people},
		want:  []Example{{"id": i64(math.MaxInt64), "age": f32(-3.4e38), "name": str("c")}},
		errs: []string{
			`data.csv:2: column "id" (1): "9223372036854775808" is not an integer (out of int64's range)`,
			`data.csv:3: column "age" (2): "1e39" is not a number (out of float32's range)`,
		},
	}, {
		name:  "values are not trimmed",
		files: map[string]string{"data.csv": "id,age,name\n 1,2,a\n"},
		opts:  CSVOptions{Schema: people},
		errs:  []string{`data.csv:2: column "id" (1): " 1" is not an integer`},
	}, {
		name:  "a bare quote",
		files: map[string]string{"data.csv": "id,age,name\n1,2,a\"b\n2,3,c\n"},
		opts:  CSVOptions{Schema: people},
		want:  []Example{{"id": i64(2), "age": f32(3), "name": str("c")}},
		errs:  []string{`data.csv:2: bare " in non-quoted-field (character 6 of the line)`},
	}, {
		name:  "an unterminated quote",
		files: map[string]string{"data.csv": "id,age,name\n1,2,\"a\nb\n"},
		opts:  CSVOptions{Schema: people},
		errs:  []string{`data.csv:3: extraneous or missing " in quoted-field (character 3 of the line; the row starts on line 2)`},
	}, {
		name:  "selected columns: others not parsed",
		files: map[string]string{"data.csv": "id,age,name\n1,oops,a\n2,,b\n"},
		opts:  CSVOptions{Schema: people, Columns: []string{"name", "id"}},
		want:  []Example{{"id": i64(1), "name": str("a")}, {"id": i64(2), "name": str("b")}},
	}, {
		name: "files by pattern and by name, in order; lines per file",
		files: map[string]string{
			"part-1.csv": "id,age,name\n1,1,a\n",
			"part-0.csv": "id,age,name\n0,0,z\n",
			"extra.csv":  "id,age,name\n5,5,e\nbad,5,e\n",
		},
		read: []string{"part-*.csv", "extra.csv"},
		opts: CSVOptions{Schema: people},
		want: []Example{
			{"id": i64(0), "age": f32(0), "name": str("z")},
			{"id": i64(1), "age": f32(1), "name": str("a")},
			{"id": i64(5), "age": f32(5), "name": str("e")},
		},
		errs: []string{`extra.csv:3: column "id" (1): "bad" is not an integer`},
	}, {
		name:  "a header that names another column",
		files: map[string]string{"data.csv": "id,years,name\n1,2,a\n"},
		opts:  CSVOptions{Schema: people},
		errs:  []string{`data.csv:1: column 2: named "years" in the header, "age" in the schema`},
	}, {
		name:  "a header with a column too many",
		files: map[string]string{"a.csv": "id,age,name\n1,2,a\n", "b.csv": "# b\nid,age,name,x\n1,2,a,x\n"},
		read:  []string{"a.csv", "b.csv"},
		opts:  CSVOptions{Schema: people, Comment: '#'},
		want:  []Example{{"id": i64(1), "age": f32(2), "name": str("a")}},
		errs:  []string{`b.csv:2: the header has 4 columns ("id", "age", "name", "x"), the schema 3 ("id", "age", "name")`},
	}, {
		name:  "an empty file where a header is due",
		files: map[string]string{"data.csv": ""},
		opts:  CSVOptions{Schema: people},
		errs:  []string{`data.csv: empty file: no header row (CSVOptions.NoHeader is false)`},
	}, {
		name:  "an empty file without header: no rows",
		files: map[string]string{"data.csv": ""},
		opts:  CSVOptions{Schema: people, NoHeader: true},
	}, {
		name:  "reused examples hold each row's values",
		files: map[string]string{"data.csv": "id,age,name\n1,2,long name\n3,4,b\n5,6,\"\"\n"},
		opts:  CSVOptions{Schema: people, ReuseExample: true, Columns: []string{"id", "name"}},
		want:  []Example{{"id": i64(1), "name": str("long name")}, {"id": i64(3), "name": str("b")}},
		errs:  []string{`data.csv:4: column "name" (3): empty value, and the column is not Optional`},
	}, {
		name:  "a pattern that matches nothing",
		files: map[string]string{"data.csv": ""},
		read:  []string{"data.csv", "nothing-*.csv"},
		opts:  CSVOptions{Schema: people},
		errs:  []string{`file pattern "nothing-*.csv" matches no file`},
	}, {
		name:  "a file that is not there",
		files: map[string]string{"data.csv": ""},
		read:  []string{"data.csv", "other.csv"},
		opts:  CSVOptions{Schema: people},
		errs:  []string{`lstat other.csv: no such file or directory`},
	}, {
		name:  "a file named twice",
		files: map[string]string{"data.csv": ""},
		read:  []string{"*.csv", "data.csv"},
		opts:  CSVOptions{Schema: people},
		errs:  []string{`file data.csv named twice (by "data.csv" and before)`},
	}, {
		name:  "a column selected that the schema lacks",
		files: map[string]string{"data.csv": ""},
		opts:  CSVOptions{Schema: people, Columns: []string{"id", "height"}},
		errs:  []string{`column "height" selected, and the schema has no such column`},
	}, {
		name:  "a quote as delimiter",
		files: map[string]string{"data.csv": ""},
		opts:  CSVOptions{Schema: people, Comma: '"'},
		errs:  []string{`delimiter '"', comment '\x00': csv: invalid field or comment delimiter`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			read := tt.read
			if read == nil {
				read = []string{"data.csv"}
			}
			got, errs := readCSV(t, dir, read, tt.opts)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float32) bool {
				return a == b || a != a && b != b
			})); diff != "" {
				t.Errorf("examples (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.errs, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCSVErrorIsAndAs(t *testing.T) {
	dir := writeFiles(t, map[string]string{"data.csv": "id,age,name\nx,1,a\n1,,a\n"})
	r, err := NewCSVReader([]string{filepath.Join(dir, "data.csv")}, CSVOptions{Schema: people})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []CSVError
	for _, want := range []error{ErrNotInt, ErrMissing} {
		_, err := r.Next()
		var ce *CSVError
		if !errors.As(err, &ce) || !errors.Is(err, want) {
			t.Fatalf("Next: %v, want a *CSVError wrapping %v", err, want)
		}
		c := *ce
		c.Err = nil
		got = append(got, c)
	}
	want := []CSVError{
		{File: filepath.Join(dir, "data.csv"), Line: 2, Column: 1, Name: "id"},
		{File: filepath.Join(dir, "data.csv"), Line: 3, Column: 2, Name: "age"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("Next after the last row: %v, want io.EOF", err)
	}
}

func TestCSVReaderStopsAfterHeaderErrorAndClose(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.csv": "x\n1\n", "b.csv": "id,age,name\n1,2,a\n"})
	r, err := NewCSVReader([]string{filepath.Join(dir, "*.csv")}, CSVOptions{Schema: people})
	if err != nil {
		t.Fatal(err)
	}
	_, first := r.Next()
	_, again := r.Next()
	if first == nil || again != first {
		t.Errorf("Next: %v, then %v; want a header error, then the same", first, again)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := r.Next(); err == nil || err == io.EOF {
		t.Errorf("Next after Close: %v, want an error", err)
	}
}

func TestSchema(t *testing.T) {
	tests := []struct {
		name   string
		schema Schema
		err    string
	}{
		{"none", Schema{}, "schema has no columns"},
		{"no name", Schema{{Kind: KindInt64}}, "schema column 1 has no name"},
		{"twice", Schema{{Name: "a", Kind: KindInt64}, {Name: "a", Kind: KindFloat}}, `schema column "a" (2): the name of column 1 too`},
		{"no kind", Schema{{Name: "a"}}, `schema column "a" (1): kind none; a column is KindInt64, KindFloat or KindBytes`},
		{"bad default", Schema{{Name: "a", Kind: KindInt64, Optional: true, Default: "1.5"}}, `schema column "a" (1): Default: "1.5" is not an integer`},
		{"default not optional", Schema{{Name: "a", Kind: KindBytes, Default: "x"}}, `schema column "a" (1): Default "x" set on a column that is not Optional`},
		{"fine", people, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := tt.schema.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.err {
				t.Errorf("Validate: %q, want %q", got, tt.err)
			}
		})
	}
}

func TestSchemaString(t *testing.T) {
	s := Schema{
		{Name: "id", Kind: KindInt64},
		{Name: `a "b"`, Kind: KindFloat, Optional: true, Default: "NaN"},
		{Name: "c", Kind: KindBytes, Optional: true},
	}
	want := "dataset.Schema{\n" +
		"\t{Name: \"id\", Kind: dataset.KindInt64},\n" +
		"\t{Name: \"a \\\"b\\\"\", Kind: dataset.KindFloat, Optional: true, Default: \"NaN\"},\n" +
		"\t{Name: \"c\", Kind: dataset.KindBytes, Optional: true},\n" +
		"}"
	if diff := cmp.Diff(want, s.String()); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
}

// TestCSVReaderReuseHoldsARow checks that a reused Example's buffer holds
// the longest row's strings, not every row's.
func TestCSVReaderReuseHoldsARow(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,age,name\n")
	for range 1000 {
		b.WriteString("1,2,twenty bytes long.\n")
	}
	dir := writeFiles(t, map[string]string{"data.csv": b.String()})
	r, err := NewCSVReader([]string{filepath.Join(dir, "data.csv")}, CSVOptions{Schema: people, ReuseExample: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		if _, err := r.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if n := cap(r.buf); n > 20 {
		t.Errorf("after 1000 rows of 20 bytes of strings, the buffer holds %d bytes", n)
	}
}

// step is one call of Next: the position before it, and its Example or
// error.
type step struct {
	Pos CSVPosition
	Ex  Example
	Err string
}

// readSteps calls Next until io.EOF or an error that ends the stream.
func readSteps(t *testing.T, r *CSVReader) []step {
	t.Helper()
	var steps []step
	var last error
	for {
		pos := r.Position()
		ex, err := r.Next()
		if err == io.EOF || err != nil && err == last {
			return steps
		}
		s := step{Pos: pos, Ex: ex}
		if err != nil {
			s.Err, last = err.Error(), err
		}
		steps = append(steps, s)
	}
}

// TestCSVReaderSeek checks that a reader that Seeks to any position
// Position gave reads what a reader reading from the start reads from
// there: the same rows, and the same errors on the same lines.
func TestCSVReaderSeek(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.csv": "# comment\nid,age,name\n1,2,\"x\ny\"\n\n# another\n2,,b\n\"3\",4,\"c\n\nd\"\n4,x,e\n5,5,\"\"\"\"",
		"b.csv": "id,age,name\n6,6,f\n7,7,g\n",
	})
	opts := CSVOptions{Schema: people, Comment: '#', ReuseExample: false}
	r, err := NewCSVReader([]string{filepath.Join(dir, "*.csv")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	all := readSteps(t, r)
	if end := r.Position(); end != (CSVPosition{File: 2}) {
		t.Errorf("Position at the end: %+v, want {File: 2}", end)
	}
	var errs []string
	for _, s := range all {
		if s.Err != "" {
			errs = append(errs, strings.ReplaceAll(s.Err, dir+string(filepath.Separator), ""))
		}
	}
	wantErrs := []string{
		`a.csv:7: column "age" (2): empty value, and the column is not Optional`,
		`a.csv:11: column "age" (2): "x" is not a number`,
	}
	if diff := cmp.Diff(wantErrs, errs); diff != "" || len(all) != 7 {
		t.Fatalf("%d steps; errors (-want +got):\n%s", len(all), diff)
	}
	for k := range all {
		s, err := NewCSVReader([]string{filepath.Join(dir, "*.csv")}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Seek(all[k].Pos); err != nil {
			t.Fatalf("Seek(%+v): %v", all[k].Pos, err)
		}
		if diff := cmp.Diff(all[k:], readSteps(t, s)); diff != "" {
			t.Errorf("after Seek(%+v) (-want +got):\n%s", all[k].Pos, diff)
		}
		s.Close()
	}
}

func TestCSVReaderSeekErrors(t *testing.T) {
	dir := writeFiles(t, map[string]string{"data.csv": "id,age,name\n1,2,a\n"})
	tests := []struct {
		pos CSVPosition
		err string
	}{
		{CSVPosition{File: -1}, `position {File:-1 Offset:0} is not in the 1 files`},
		{CSVPosition{File: 1, Offset: 3}, `position {File:1 Offset:3} is not in the 1 files`},
		{CSVPosition{File: 0, Offset: -1}, `position {File:0 Offset:-1} is not in the 1 files`},
		{CSVPosition{File: 0, Offset: 5}, `data.csv: offset 5 is inside the header, which ends at 12`},
		{CSVPosition{File: 0, Offset: 19}, `data.csv: offset 19 is beyond the end of the file (18 bytes)`},
	}
	for _, tt := range tests {
		r, err := NewCSVReader([]string{filepath.Join(dir, "data.csv")}, CSVOptions{Schema: people})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Seek(tt.pos)
		got := ""
		if err != nil {
			got = strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
		}
		if got != tt.err {
			t.Errorf("Seek(%+v): %q, want %q", tt.pos, got, tt.err)
		}
		if _, nerr := r.Next(); err != nil && nerr != err {
			t.Errorf("Next after Seek's error: %v, want it again", nerr)
		}
		r.Close()
	}
}
