package census

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// Lines as the UCI files have them.
const (
	dataLines = "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K\n" +
		"50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 0, 13, United-States, <=50K\n" +
		"\n"
	testLines = "|1x3 Cross validator\n" +
		"25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, 0, 0, 40, United-States, <=50K.\n" +
		"44, Private, 160323, Some-college, 10, Married-civ-spouse, Machine-op-inspct, Husband, Black, Male, 7688, 0, 40, United-States, >50K.\n" +
		"18, ?, 103497, Some-college, 10, Never-married, ?, Own-child, White, Female, 0, 0, 30, United-States, <=50K.\n" +
		"\n"
)

func TestClean(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"adult.data", dataLines,
			"39,State-gov,77516,Bachelors,13,Never-married,Adm-clerical,Not-in-family,White,Male,2174,0,40,United-States,<=50K\n" +
				"50,Self-emp-not-inc,83311,Bachelors,13,Married-civ-spouse,Exec-managerial,Husband,White,Male,0,0,13,United-States,<=50K\n"},
		{"adult.test", testLines,
			"25,Private,226802,11th,7,Never-married,Machine-op-inspct,Own-child,Black,Male,0,0,40,United-States,<=50K\n" +
				"44,Private,160323,Some-college,10,Married-civ-spouse,Machine-op-inspct,Husband,Black,Male,7688,0,40,United-States,>50K\n" +
				"18,?,103497,Some-college,10,Never-married,?,Own-child,White,Female,0,0,30,United-States,<=50K\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			n, err := Clean(tc.name, strings.NewReader(tc.in), &b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("cleaned (-want +got):\n%s", diff)
			}
			if want := strings.Count(tc.want, "\n"); n != want {
				t.Errorf("%d rows, want %d", n, want)
			}
		})
	}
}

func TestCleanErrors(t *testing.T) {
	_, err := Clean("adult.data", strings.NewReader(dataLines+"39, State-gov, 77516\n"), io.Discard)
	wanterr.Mentions(t, err, "adult.data:4: 3 fields, want 15 (age, workclass")
}

// TestSyntheticReadsAsTheRealFiles: synthetic adult.data and adult.test,
// in the UCI format, clean and read with Schema as the real files do,
// about a quarter of the rows ">50K", and the label follows the signal
// (marriage raises the share of ">50K" rows).
func TestSyntheticReadsAsTheRealFiles(t *testing.T) {
	raw, out := t.TempDir(), t.TempDir()
	if err := WriteSynthetic(raw, 4000, 1); err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile(filepath.Join(raw, "adult.test"))
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := bytes.Cut(test, []byte("\n"))
	if string(first) != "|1x3 Cross validator" || !bytes.HasSuffix(bytes.SplitN(rest, []byte("\n"), 2)[0], []byte("K.")) {
		t.Errorf("adult.test begins %q, %q; want the UCI file's first line and labels ending in \".\"", first, bytes.SplitN(rest, []byte("\n"), 2)[0])
	}
	train, eval, err := Prepare(raw, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		rows int
	}{{train, 4000}, {eval, 2000}} {
		r, err := Reader(f.path)
		if err != nil {
			t.Fatal(err)
		}
		var rows, pos int
		married := [2][2]int{} // [married][positive]
		for {
			ex, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			rows++
			label := string(ex[Label].Bytes[0])
			if label != Positive && label != "<=50K" {
				t.Fatalf("%s row %d: label %q", f.path, rows, label)
			}
			p := 0
			if label == Positive {
				p = 1
				pos++
			}
			m := 0
			if string(ex["marital_status"].Bytes[0]) == "Married-civ-spouse" {
				m = 1
			}
			married[m][p]++
		}
		r.Close()
		if rows != f.rows {
			t.Errorf("%s: %d rows, want %d", f.path, rows, f.rows)
		}
		if share := float64(pos) / float64(rows); share < 0.15 || share > 0.4 {
			t.Errorf("%s: %.2f of the rows >50K, want about a quarter", f.path, share)
		}
		rate := func(m int) float64 { return float64(married[m][1]) / float64(married[m][0]+married[m][1]) }
		if rate(1) < 1.5*rate(0) {
			t.Errorf("%s: >50K among the married %.2f, among the others %.2f: no signal", f.path, rate(1), rate(0))
		}
	}
}

// TestSchemaIsValid keeps the schema usable by dataset's reader.
func TestSchemaIsValid(t *testing.T) {
	if err := Schema.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := Schema[len(Schema)-1]; got.Name != Label || got.Kind != dataset.KindBytes {
		t.Errorf("last column %+v, want the label", got)
	}
}

// TestColumns: the tutorial's columns, by TensorFlow's names.
func TestColumns(t *testing.T) {
	wide, deep := Columns()
	names := func(cs []columns.Column) []string {
		var n []string
		for _, c := range cs {
			n = append(n, c.Name())
		}
		return n
	}
	if diff := cmp.Diff([]string{"education", "marital_status", "relationship", "workclass", "occupation", "age_bucketized",
		"education_X_occupation", "age_bucketized_X_education_X_occupation"}, names(wide)); diff != "" {
		t.Errorf("wide (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"age", "education_num", "capital_gain", "capital_loss", "hours_per_week",
		"workclass_indicator", "education_indicator", "marital_status_indicator", "relationship_indicator", "occupation_embedding"}, names(deep)); diff != "" {
		t.Errorf("deep (-want +got):\n%s", diff)
	}
	if got := len(Config().Columns); got != 18 {
		t.Errorf("Config has %d columns, want 18", got)
	}
}
