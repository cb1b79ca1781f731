package dataset

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInferCSVSchema(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		read  []string // nil: "data.csv"
		opts  CSVOptions
		rows  int
		want  Schema
		err   string
	}{{
		name:  "integers, numbers, strings",
		files: map[string]string{"data.csv": "i,f,s,mixed\n1,1.5,a,1\n-2,3,b,x\n+3,NaN,4,2.5\n"},
		rows:  10,
		want: Schema{
			{Name: "i", Kind: KindInt64},
			{Name: "f", Kind: KindFloat},
			{Name: "s", Kind: KindBytes},
			{Name: "mixed", Kind: KindBytes},
		},
	}, {
		name:  "empty values do not decide, and make a column Optional",
		files: map[string]string{"data.csv": "i,f,none\n,,\n2,,\n,1e-3,\"\"\n"},
		rows:  10,
		want: Schema{
			{Name: "i", Kind: KindInt64, Optional: true},
			{Name: "f", Kind: KindFloat, Optional: true},
			{Name: "none", Kind: KindBytes, Optional: true},
		},
	}, {
		name:  "beyond int64 is a number, beyond float32 a string",
		files: map[string]string{"data.csv": "a,b\n9223372036854775808,1e38\n1,1e39\n"},
		rows:  10,
		want:  Schema{{Name: "a", Kind: KindFloat}, {Name: "b", Kind: KindBytes}},
	}, {
		name:  "only the sample decides",
		files: map[string]string{"data.csv": "a,b\n1,2\n3,4\nx,y\n"},
		rows:  2,
		want:  Schema{{Name: "a", Kind: KindInt64}, {Name: "b", Kind: KindInt64}},
	}, {
		name:  "the sample goes on into the next file",
		files: map[string]string{"1.csv": "a,b\n1,2\n", "2.csv": "a,b\n3,x\n", "3.csv": "a,b\ny,z\n"},
		read:  []string{"*.csv"},
		rows:  2,
		want:  Schema{{Name: "a", Kind: KindInt64}, {Name: "b", Kind: KindBytes}},
	}, {
		name:  "no header: numbered names; quoted fields and comments",
		files: map[string]string{"data.csv": "# x\n1;\"a;\nb\";2.5\n"},
		opts:  CSVOptions{NoHeader: true, Comma: ';', Comment: '#'},
		rows:  5,
		want: Schema{
			{Name: "column1", Kind: KindInt64},
			{Name: "column2", Kind: KindBytes},
			{Name: "column3", Kind: KindFloat},
		},
	}, {
		name:  "headers that differ",
		files: map[string]string{"1.csv": "a,b\n1,2\n", "2.csv": "a,c\n3,4\n"},
		read:  []string{"*.csv"},
		rows:  5,
		err:   `2.csv:1: column 2: named "c" in the header, "b" in 1.csv's`,
	}, {
		name:  "a row with a column too many",
		files: map[string]string{"data.csv": "a,b\n1,2\n3,4,5\n"},
		rows:  5,
		err:   `data.csv:3: 3 columns, 2 before ("a", "b")`,
	}, {
		name:  "a header naming a column twice",
		files: map[string]string{"data.csv": "a,a\n1,2\n"},
		rows:  5,
		err:   `data.csv: the header: schema column "a" (2): the name of column 1 too`,
	}, {
		name:  "no data rows",
		files: map[string]string{"data.csv": "a,b\n"},
		rows:  5,
		err:   `data.csv: no data rows to infer a schema from`,
	}, {
		name:  "no rows asked for",
		files: map[string]string{"data.csv": "a,b\n1,2\n"},
		err:   `InferCSVSchema: 0 rows to sample; at least 1`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			read := tt.read
			if read == nil {
				read = []string{"data.csv"}
			}
			for i := range read {
				read[i] = filepath.Join(dir, read[i])
			}
			got, err := InferCSVSchema(read, tt.opts, tt.rows)
			gotErr := ""
			if err != nil {
				gotErr = strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
			}
			if gotErr != tt.err {
				t.Errorf("error %q, want %q", gotErr, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("schema (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInferredSchemaReadsTheSample checks that the schema inferred reads
// back the rows it was inferred from.
func TestInferredSchemaReadsTheSample(t *testing.T) {
	dir := writeFiles(t, map[string]string{"data.csv": "id,score,city\n1,0.5,Oslo\n2,,\n3,7,Rome\n"})
	files := []string{filepath.Join(dir, "data.csv")}
	s, err := InferCSVSchema(files, CSVOptions{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	got, errs := readCSV(t, dir, []string{"data.csv"}, CSVOptions{Schema: s})
	want := []Example{
		{"id": i64(1), "score": f32(0.5), "city": str("Oslo")},
		{"id": i64(2), "score": f32(0), "city": str("")},
		{"id": i64(3), "score": f32(7), "city": str("Rome")},
	}
	if diff := cmp.Diff(want, got); diff != "" || errs != nil {
		t.Errorf("rows (-want +got):\n%s\nerrors: %q", diff, errs)
	}
}
