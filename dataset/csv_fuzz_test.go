package dataset

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzCSVReader reads arbitrary bytes as a CSV file and checks every
// row, error and line number against encoding/csv read directly: a row
// of the schema's arity whose values parse is that Example, anything
// else a *CSVError naming the line (and the column, for a value), and
// the reader never panics.
func FuzzCSVReader(f *testing.F) {
	for _, seed := range []string{
		"a,b,c\n1,2.5,x\n,3,\n",
		"a,b,c\n1,\"2\n\",\"x\"\"y\"\n",
		"# c\na,b,c\n\n1,2,3,4\n1\nx,y,z\n",
		"\uFEFFa,b,c\r\n1,2,\"\r\n\"\r\n",
		"a;b;c\n1;2;3\n",
		"a,b,c\n1,2,\"x\n",
		"a,b,c\n1,2,x\"y\n9223372036854775808,1e39,z\n",
		"",
		"a,x,c\n1,2,3\n",
	} {
		f.Add([]byte(seed), byte(0), false)
	}
	f.Add([]byte("1|2|3\n4||\n"), byte(3), true)
	f.Fuzz(func(t *testing.T, data []byte, comma byte, noHeader bool) {
		opts := CSVOptions{
			Schema: Schema{
				{Name: "a", Kind: KindInt64, Optional: true, Default: "7"},
				{Name: "b", Kind: KindFloat},
				{Name: "c", Kind: KindBytes, Optional: true, Default: "d"},
			},
			Comma:    []rune{',', ';', '\t', '|'}[comma%4],
			Comment:  '#',
			NoHeader: noHeader,
		}
		r, err := newCSVReader([]string{"fuzz.csv"}, opts, func(string) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		checkSeek(t, data, opts)
		ref := csv.NewReader(bytes.NewReader(data))
		ref.Comma, ref.Comment, ref.FieldsPerRecord = opts.Comma, opts.Comment, -1

		// next is the reader's next result, which must be a *CSVError
		// on line (and column, if not 0) when line is not 0.
		next := func(line, col int) Example {
			t.Helper()
			ex, err := r.Next()
			if line == 0 {
				if err != nil {
					t.Fatalf("Next: %v, want a row", err)
				}
				return ex
			}
			var ce *CSVError
			if !errors.As(err, &ce) || ce.File != "fuzz.csv" || ce.Line != line || ce.Column != col {
				t.Fatalf("Next: %#v (%v), want a *CSVError on line %d, column %d", ex, err, line, col)
			}
			if col > 0 && ce.Name != opts.Schema[col-1].Name {
				t.Fatalf("%v: column named %q, want %q", err, ce.Name, opts.Schema[col-1].Name)
			}
			return nil
		}
		// ended checks that the reader's stream has ended at an error.
		ended := func() {
			t.Helper()
			_, err1 := r.Next()
			_, err2 := r.Next()
			if err1 == nil || err1 == io.EOF || err2 != err1 {
				t.Fatalf("Next after a header error: %v, then %v; want the error again", err1, err2)
			}
		}
		if !noHeader {
			header, err := ref.Read()
			var pe *csv.ParseError
			switch {
			case err == io.EOF:
				_, err := r.Next()
				if !strings.Contains(errString(err), "no header row") {
					t.Fatalf("Next on an empty file: %v", err)
				}
				ended()
				return
			case errors.As(err, &pe):
				next(pe.Line, 0)
				ended()
				return
			case err != nil:
				t.Fatal(err)
			}
			header[0] = strings.TrimPrefix(header[0], "\uFEFF")
			if !slices.Equal(header, []string{"a", "b", "c"}) {
				_, err := r.Next()
				var ce *CSVError
				if !errors.As(err, &ce) {
					t.Fatalf("Next on header %q: %v, want a *CSVError", header, err)
				}
				ended()
				return
			}
		}
		for {
			rec, err := ref.Read()
			var pe *csv.ParseError
			switch {
			case err == io.EOF:
				if _, err := r.Next(); err != io.EOF {
					t.Fatalf("Next at the end: %v, want io.EOF", err)
				}
				return
			case errors.As(err, &pe):
				next(pe.Line, 0)
				continue
			case err != nil:
				t.Fatal(err)
			}
			if len(rec) != 3 {
				line, _ := ref.FieldPos(0)
				next(line, 0)
				continue
			}
			want, badCol := Example{}, 0
			if rec[0] == "" {
				want["a"] = i64(7)
			} else if v, err := strconv.ParseInt(rec[0], 10, 64); err == nil {
				want["a"] = i64(v)
			} else {
				badCol = 1
			}
			if badCol == 0 {
				if v, err := strconv.ParseFloat(rec[1], 32); rec[1] != "" && err == nil {
					want["b"] = f32(float32(v))
				} else {
					badCol = 2
				}
			}
			if badCol != 0 {
				line, _ := ref.FieldPos(badCol - 1)
				next(line, badCol)
				continue
			}
			if rec[2] == "" {
				want["c"] = str("d")
			} else {
				want["c"] = str(rec[2])
			}
			got := next(0, 0)
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float32) bool {
				return a == b || a != a && b != b
			})); diff != "" {
				t.Fatalf("row %q (-want +got):\n%s", rec, diff)
			}
		}
	})
}

type seekCloser struct{ *bytes.Reader }

func (seekCloser) Close() error { return nil }

// checkSeek checks that Seek to any position Position gave reading data
// reads what follows it.
func checkSeek(t *testing.T, data []byte, opts CSVOptions) {
	t.Helper()
	open := func(string) (io.ReadCloser, error) { return seekCloser{bytes.NewReader(data)}, nil }
	r, err := newCSVReader([]string{"fuzz.csv"}, opts, open)
	if err != nil {
		t.Fatal(err)
	}
	all := readSteps(t, r)
	for k := range all {
		s, err := newCSVReader([]string{"fuzz.csv"}, opts, open)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Seek(all[k].Pos); err != nil {
			t.Fatalf("Seek(%+v): %v", all[k].Pos, err)
		}
		if diff := cmp.Diff(all[k:], readSteps(t, s), cmp.Comparer(func(a, b float32) bool {
			return a == b || a != a && b != b
		})); diff != "" {
			t.Fatalf("after Seek(%+v) (-want +got):\n%s", all[k].Pos, diff)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
