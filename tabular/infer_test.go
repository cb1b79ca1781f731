package tabular

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/internal/wanterr"
)

func str(v string) dataset.Feature  { return dataset.Feature{Bytes: [][]byte{[]byte(v)}} }
func num(v float32) dataset.Feature { return dataset.Feature{Floats: []float32{v}} }
func i64(v int64) dataset.Feature   { return dataset.Feature{Int64s: []int64{v}} }

// rows makes n records with a label from label(i) and features city
// (cities(i)), x (float i) and k (int64 i%3).
func rows(n int, label func(i int) dataset.Feature, cities func(i int) string) []dataset.Example {
	out := make([]dataset.Example, n)
	for i := range out {
		out[i] = dataset.Example{"y": label(i), "x": num(float32(i)), "k": i64(int64(i % 3)), "city": str(cities(i))}
	}
	return out
}

func TestInferHead(t *testing.T) {
	few := func(i int) string { return fmt.Sprint("c", i%4) }
	tests := []struct {
		name  string
		label func(i int) dataset.Feature
		opts  InferOptions
		want  Head
	}{
		{"strings, the rarer positive", func(i int) dataset.Feature { return str(map[bool]string{true: "bad", false: "good"}[i%4 == 0]) },
			InferOptions{}, Head{Kind: Binary, Classes: []string{"good", "bad"}, Raw: dataset.KindBytes}},
		{"strings, -positive", func(i int) dataset.Feature { return str(map[bool]string{true: "bad", false: "good"}[i%4 == 0]) },
			InferOptions{Positive: "good"}, Head{Kind: Binary, Classes: []string{"bad", "good"}, Raw: dataset.KindBytes}},
		{"yes/no", func(i int) dataset.Feature { return str(map[bool]string{true: "no", false: "yes"}[i%4 == 0]) },
			InferOptions{}, Head{Kind: Binary, Classes: []string{"no", "yes"}, Raw: dataset.KindBytes}},
		{"0/1 integers", func(i int) dataset.Feature { return i64(int64(i % 2)) },
			InferOptions{}, Head{Kind: Binary, Classes: []string{"0", "1"}, Raw: dataset.KindInt64}},
		{"three strings", func(i int) dataset.Feature { return str(fmt.Sprint("s", i%3)) },
			InferOptions{}, Head{Kind: MultiClass, Classes: []string{"s0", "s1", "s2"}, Raw: dataset.KindBytes}},
		{"numbers", func(i int) dataset.Feature { return num(float32(i) / 3) },
			InferOptions{}, Head{Kind: Regression, Raw: dataset.KindFloat, Mean: 6.5, Stddev: 3.8477988}},
		{"few integers", func(i int) dataset.Feature { return i64(int64(i % 5)) },
			InferOptions{}, Head{Kind: Regression, Raw: dataset.KindInt64, Mean: 2, Stddev: math.Sqrt2}},
		{"few integers, forced multi-class", func(i int) dataset.Feature { return i64(int64(i % 5)) },
			InferOptions{Head: MultiClass}, Head{Kind: MultiClass, Classes: []string{"0", "1", "2", "3", "4"}, Raw: dataset.KindInt64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Label = "y"
			p, err := Infer(rows(40, tc.label, few), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, p.Head, cmpopts.EquateApprox(1e-7, 0)); diff != "" {
				t.Errorf("head (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInferFeatures(t *testing.T) {
	label := func(i int) dataset.Feature { return i64(int64(i % 2)) }
	tests := []struct {
		name   string
		cities func(i int) string
		opts   InferOptions
		city   Feature
	}{
		{"few values: one-hot", func(i int) string { return fmt.Sprint("c", i%4) }, InferOptions{},
			Feature{Name: "city", Kind: Vocabulary, Raw: dataset.KindBytes, Distinct: 4}},
		{"more than MaxOneHot: embedded", func(i int) string { return fmt.Sprint("c", i%16) }, InferOptions{},
			Feature{Name: "city", Kind: Vocabulary, Raw: dataset.KindBytes, Distinct: 16, EmbeddingDim: 12}},
		{"more than MaxVocabulary: hashed", func(i int) string { return fmt.Sprint("c", i%30) }, InferOptions{MaxVocabulary: 20},
			Feature{Name: "city", Kind: Hashed, Raw: dataset.KindBytes, Distinct: 30, HashBuckets: 64, EmbeddingDim: 15}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Label = "y"
			tc.opts.Order = []string{"x", "city"}
			p, err := Infer(rows(40, label, tc.cities), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			want := []Feature{
				{Name: "x", Kind: Number, Raw: dataset.KindFloat, Distinct: 40, Mean: 19.5, Stddev: 11.543396, QuantileBuckets: 3},
				tc.city,
				{Name: "k", Kind: Number, Raw: dataset.KindInt64, Distinct: 3, Mean: 39.0 / 40, Stddev: 0.82120339, QuantileBuckets: 3},
			}
			if diff := cmp.Diff(want, p.Features, cmpopts.EquateApprox(1e-6, 0)); diff != "" {
				t.Errorf("features (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInferMissing: a feature missing from some records counts them, and
// a number's mean is over the records that have it.
func TestInferMissing(t *testing.T) {
	sample := []dataset.Example{
		{"y": i64(0), "x": num(1), "c": str("a")},
		{"y": i64(1), "x": num(3)},
		{"y": i64(1), "c": str("b")},
		{"y": i64(0), "x": num(float32NaN()), "c": {Bytes: [][]byte{}}},
	}
	p, err := Infer(sample, InferOptions{Label: "y", Order: []string{"x", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Feature{
		{Name: "x", Kind: Number, Raw: dataset.KindFloat, Distinct: 2, Missing: 2, Mean: 2, Stddev: 1, QuantileBuckets: 3},
		{Name: "c", Kind: Vocabulary, Raw: dataset.KindBytes, Distinct: 2, Missing: 2},
	}
	if diff := cmp.Diff(want, p.Features); diff != "" {
		t.Errorf("features (-want +got):\n%s", diff)
	}
}

func TestInferErrors(t *testing.T) {
	two := func(i int) dataset.Feature { return str(fmt.Sprint("v", i%2)) }
	cities := func(i int) string { return "c" }
	tests := []struct {
		name   string
		sample []dataset.Example
		opts   InferOptions
		want   string
	}{
		{"no label", rows(4, two, cities), InferOptions{}, "no label column"},
		{"no records", nil, InferOptions{Label: "y"}, "no records"},
		{"unknown label", rows(4, two, cities), InferOptions{Label: "z"}, `label "z" is not a column of the data (columns: city, k, x, y)`},
		{"unknown ignored", rows(4, two, cities), InferOptions{Label: "y", Ignore: []string{"id"}}, `ignored column "id" is not a column`},
		{"positive not a value", rows(4, two, cities), InferOptions{Label: "y", Positive: "yes"}, `positive class "yes" is not a value of label "y" (values: "v0", "v1")`},
		{"one value", rows(4, func(int) dataset.Feature { return str("a") }, cities), InferOptions{Label: "y"}, `label "y" has one value`},
		{"string regression", rows(4, two, cities), InferOptions{Label: "y", Head: Regression}, `label "y" holds strings ("v0", "v1"); regression needs numbers`},
		{"binary of three", rows(6, func(i int) dataset.Feature { return str(fmt.Sprint(i % 3)) }, cities), InferOptions{Label: "y", Head: Binary}, `3 distinct values in the sample ("0", "1", "2"); a binary head needs 2`},
		{"positive for multi-class", rows(6, func(i int) dataset.Feature { return str(fmt.Sprint(i % 3)) }, cities), InferOptions{Label: "y", Positive: "1"}, "-positive \"1\" is for a binary label"},
		{"label missing", append(rows(4, two, cities), dataset.Example{"x": num(1)}), InferOptions{Label: "y"}, `label "y": 1 of 5 sampled records have no value`},
		{"only the label", []dataset.Example{{"y": i64(0)}, {"y": i64(1)}}, InferOptions{Label: "y"}, "no feature columns besides the label"},
		{"two values in a cell", []dataset.Example{{"y": i64(0), "x": {Floats: []float32{1, 2}}}}, InferOptions{Label: "y"}, `record 0: feature "x" has 2 values`},
		{"kinds differ", []dataset.Example{{"y": i64(0), "x": num(1)}, {"y": i64(1), "x": str("a")}}, InferOptions{Label: "y"}, `record 1: feature "x" holds bytes, earlier records float`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Infer(tc.sample, tc.opts)
			wanterr.Mentions(t, err, tc.want)
		})
	}
}

// TestSampleCSV: a CSV sample drops empty values (a missing number is no
// feature, not 0) and keeps the kinds; CSVSchema gives the missing
// numbers the plan's mean, and lets every feature be empty, not the
// label.
func TestSampleCSV(t *testing.T) {
	schema, sample, err := Sample([]string{"testdata/penguins_species/train.csv"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(sample) != 276 {
		t.Fatalf("%d rows, want 276", len(sample))
	}
	// The second row: Torgersen,,,,,,Adelie.
	if diff := cmp.Diff(dataset.Example{"island": str("Torgersen"), "species": str("Adelie")}, sample[1]); diff != "" {
		t.Errorf("row 2 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(dataset.Example{"island": str("Torgersen"), "bill_length_mm": num(39.1), "bill_depth_mm": num(18.7),
		"flipper_length_mm": i64(181), "body_mass_g": i64(3750), "sex": str("male"), "species": str("Adelie")}, sample[0]); diff != "" {
		t.Errorf("row 1 (-want +got):\n%s", diff)
	}
	p, err := Infer(sample, InferOptions{Label: "species", Order: ColumnNames(schema)})
	if err != nil {
		t.Fatal(err)
	}
	got := p.CSVSchema(schema)
	want := dataset.Column{Name: "flipper_length_mm", Kind: dataset.KindFloat, Optional: true, Default: "201.32727"}
	if diff := cmp.Diff(want, got[3]); diff != "" {
		t.Errorf("CSVSchema's flipper_length_mm (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(dataset.Column{Name: "island", Kind: dataset.KindBytes, Optional: true}, got[0]); diff != "" {
		t.Errorf("CSVSchema's island (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(schema[6], got[6]); diff != "" {
		t.Errorf("CSVSchema changed the label (-want +got):\n%s", diff)
	}
}

func float32NaN() float32 { return float32(math.NaN()) }

// TestSampleRecords: TFRecord files are sampled as their tf.Examples, up
// to the rows asked for, across files, gzipped or not as their names say.
func TestSampleRecords(t *testing.T) {
	dir := t.TempDir()
	var all []dataset.Example
	for f := 0; f < 2; f++ {
		w, err := dataset.CreateRecords(fmt.Sprintf("%s/part-%d.tfrecord%s", dir, f, []string{"", ".gz"}[f]), dataset.AutoCompression)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			ex := dataset.Example{"y": i64(int64(i % 2)), "x": num(float32(10*f + i)), "c": str(fmt.Sprint("c", i))}
			all = append(all, ex)
			if err := w.WriteExample(ex); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, rows := range []int{2, 5, 100} {
		schema, got, err := Sample([]string{dir + "/part-*.tfrecord*"}, rows)
		if err != nil {
			t.Fatal(err)
		}
		if schema != nil {
			t.Errorf("a schema for TFRecord files: %v", schema)
		}
		if diff := cmp.Diff(all[:min(rows, len(all))], got); diff != "" {
			t.Errorf("%d rows (-want +got):\n%s", rows, diff)
		}
	}
	_, _, err := Sample([]string{dir + "/none.tfrecord"}, 10)
	wanterr.Mentions(t, err, "none.tfrecord")
	_, _, err = Sample([]string{dir + "/rows.csv.gz"}, 10)
	wanterr.Mentions(t, err, "rows.csv.gz: compressed CSV files are not read")
}
