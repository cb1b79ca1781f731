package columns

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/dataset"
)

// examples is a dataset.Source of a slice.
type examples []dataset.Example

func (e *examples) Next() (dataset.Example, error) {
	if len(*e) == 0 {
		return nil, io.EOF
	}
	ex := (*e)[0]
	*e = (*e)[1:]
	return ex, nil
}

func source(exs ...dataset.Example) *examples { s := examples(exs); return &s }

func mustFit(t *testing.T, cfg Config, exs ...dataset.Example) *Transformer {
	t.Helper()
	tr, err := Fit(context.Background(), source(exs...), cfg)
	if err != nil {
		t.Fatalf("Fit: %v", err)
	}
	return tr
}

func TestFitStandardize(t *testing.T) {
	for _, tc := range []struct {
		name string
		exs  []dataset.Example
		want Normalizer
	}{
		// Missing values and NaNs (which take the default) are left out.
		{"values", []dataset.Example{{"x": fl(1)}, {"x": in(2)}, {}, {"x": fl(nan32())}, {"x": fl(3)}, {"x": fl(4)}},
			Normalizer{Mean: 2.5, Stddev: math.Sqrt(1.25), FromData: true}},
		{"constant", []dataset.Example{{"x": fl(5)}, {"x": fl(5)}},
			Normalizer{Mean: 5, Stddev: 1, FromData: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := mustFit(t, Config{Columns: []Column{Numeric("x", Standardize(), Default(0))}}, tc.exs...)
			c, _ := tr.Column("x")
			got, ok := c.(*NumericColumn).Normalizer()
			if !ok {
				t.Fatal("fitted column has no normalizer")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("normalizer (-want +got):\n%s", diff)
			}
			b, err := tr.Parse([]dataset.Example{{"x": fl(float32(tc.want.Mean))}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]float32{0}, b.Features["x"].Data()); diff != "" {
				t.Errorf("the mean standardized (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitQuantiles(t *testing.T) {
	var hundred []dataset.Example
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, dataset.Example{"x": fl(float32(i))})
	}
	for _, tc := range []struct {
		name string
		col  *BucketizedColumn
		exs  []dataset.Example
		want []float64
	}{
		{"1…100 in 4", BucketizedQuantiles(Numeric("x"), 4), hundred, []float64{26, 51, 76}},
		{"repeats and the least value dropped", BucketizedQuantiles(Numeric("x"), 4),
			[]dataset.Example{{"x": fl(0)}, {"x": fl(0)}, {"x": fl(0)}, {"x": fl(0)}, {"x": fl(0)}, {"x": fl(0)}, {"x": fl(1)}, {"x": fl(2)}},
			[]float64{1}},
		{"constant: one bucket", BucketizedQuantiles(Numeric("x"), 3), []dataset.Example{{"x": fl(7)}, {"x": fl(7)}}, []float64{}},
		// The boundaries are of the values the bucketizer sees:
		// defaulted and normalized.
		{"normalized source", BucketizedQuantiles(Numeric("x", Normalize(Normalizer{Mean: 1, Stddev: 2}), Default(9)), 2),
			[]dataset.Example{{"x": fl(1)}, {}, {"x": fl(3)}, {"x": fl(5)}}, []float64{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := mustFit(t, Config{Columns: []Column{tc.col}}, tc.exs...)
			c, _ := tr.Column(tc.col.Name())
			if diff := cmp.Diff(tc.want, c.(*BucketizedColumn).Boundaries()); diff != "" {
				t.Errorf("boundaries (-want +got):\n%s", diff)
			}
		})
	}
	// A standardized source: the boundaries are of the standardized
	// values, and the numeric column and the bucketized one's source are
	// one fitted column.
	x := Numeric("x", Standardize())
	tr := mustFit(t, Config{Columns: []Column{x, BucketizedQuantiles(x, 2)}}, dataset.Example{"x": fl(0)}, dataset.Example{"x": fl(2)})
	cols := tr.Columns()
	if cols[1].(*BucketizedColumn).Source() != cols[0] {
		t.Errorf("the bucketized column's source is not the fitted numeric column")
	}
	if diff := cmp.Diff([]float64{1}, cols[1].(*BucketizedColumn).Boundaries()); diff != "" {
		t.Errorf("boundaries of the standardized values (-want +got):\n%s", diff)
	}
}

func TestFitVocabulary(t *testing.T) {
	exs := []dataset.Example{
		{"c": by("b", "a")}, {"c": by("c")}, {"c": by("b")}, {"c": by("d", "a")}, {}, {"c": by("b")},
	}
	for _, tc := range []struct {
		name string
		col  *VocabularyColumn
		exs  []dataset.Example
		want []string
	}{
		{"by count, ties in byte order", VocabularyFromData("c"), exs, []string{"b", "a", "c", "d"}},
		{"min count", VocabularyFromData("c", MinCount(2)), exs, []string{"b", "a"}},
		{"max size", VocabularyFromData("c", MaxSize(3), OOVBuckets(1)), exs, []string{"b", "a", "c"}},
		{"integers", VocabularyFromData("c"), []dataset.Example{{"c": in(7, 10)}, {"c": in(10)}}, []string{"10", "7"}},
		{"empty strings are missing values", VocabularyFromData("c"), []dataset.Example{{"c": by("", "a")}, {"c": by("")}, {"c": by("", "b")}}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := mustFit(t, Config{Columns: []Column{Embedding(tc.col, 2)}}, tc.exs...)
			c := tr.Columns()[0].(*EmbeddingColumn).Categorical().(*VocabularyColumn)
			if diff := cmp.Diff(tc.want, c.Vocabulary()); diff != "" {
				t.Errorf("vocabulary (-want +got):\n%s", diff)
			}
		})
	}
	// The fitted vocabulary is the one Parse uses, its OOV bucket after it.
	tr := mustFit(t, Config{Columns: []Column{VocabularyFromData("c", MaxSize(2), OOVBuckets(1))}}, exs...)
	b, err := tr.Parse([]dataset.Example{{"c": by("a", "b", "z")}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{1, 0, 2}, b.Sparse["c"].Values.Data()); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}

func TestFitSharedEmbeddings(t *testing.T) {
	exs := []dataset.Example{{"a": by("x", "y"), "b": by("p", "q", "r")}}
	shared := SharedEmbeddings([]CategoricalColumn{VocabularyFromData("a", MaxSize(2)), VocabularyFromData("b", MaxSize(2))}, 4)
	tr := mustFit(t, Config{Columns: []Column{shared[0], shared[1]}}, exs...)
	cols := tr.Columns()
	for i, c := range cols {
		e := c.(*EmbeddingColumn)
		if e.TableName() != "a_b_shared_embedding" || e.Categorical().NumBuckets() != 2 {
			t.Errorf("column %d: table %q, %d buckets; want a_b_shared_embedding, 2", i, e.TableName(), e.Categorical().NumBuckets())
		}
		if e.shared.cats[i] != e.Categorical() {
			t.Errorf("column %d: the shared table's columns are not the fitted ones", i)
		}
	}
	unequal := SharedEmbeddings([]CategoricalColumn{VocabularyFromData("a"), VocabularyFromData("b")}, 4)
	_, err := Fit(context.Background(), source(exs...), Config{Columns: []Column{unequal[0], unequal[1]}})
	if err == nil || !strings.Contains(err.Error(), "differ in size") {
		t.Errorf("shared embedding of vocabularies of 2 and 3: error %v, want one saying they differ in size", err)
	}
	// One of the shared columns alone: the others of the table are
	// fitted too (the table's size is all of theirs).
	_, err = Fit(context.Background(), source(exs...), Config{Columns: []Column{unequal[0]}})
	if err == nil || !strings.Contains(err.Error(), "differ in size") {
		t.Errorf("one column of a shared embedding of vocabularies of 2 and 3: error %v, want one saying they differ in size", err)
	}
	tr = mustFit(t, Config{Columns: []Column{shared[1]}}, exs...)
	e := tr.Columns()[0].(*EmbeddingColumn)
	if v := e.shared.cats[0].(*VocabularyColumn).Vocabulary(); !slices.Equal(v, []string{"x", "y"}) {
		t.Errorf("the shared table's other column, not given to Fit: vocabulary %q, want [x y]", v)
	}
}

// TestFitFeaturesPresent: a feature that only some records have (an
// empty string counts) is not one the records lack, and a feature with a
// default, the label and the example weight may be absent from all.
func TestFitFeaturesPresent(t *testing.T) {
	mustFit(t, Config{Columns: []Column{Numeric("x"), HashBucket("c", 3), Crossed([]Crossable{RawKey("c"), RawKey("d")}, 5), Numeric("z", Default(0))},
		Label: &Label{Key: "y"}, Weight: &ExampleWeight{Key: "w"}},
		dataset.Example{"x": fl(1)}, dataset.Example{"c": by("a")}, dataset.Example{"d": by("")})
}

func TestFitErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		cfg  Config
		exs  []dataset.Example
		says []string
	}{
		{"a string to standardize", context.Background(), Config{Columns: []Column{Numeric("x", Standardize())}},
			[]dataset.Example{{"x": fl(1)}, {"x": fl(1)}, {"x": by("n/a")}}, []string{`column "x"`, "example 2", `"n/a"`}},
		{"a float in a vocabulary", context.Background(), Config{Columns: []Column{VocabularyFromData("c")}},
			[]dataset.Example{{"c": fl(0.5)}}, []string{`column "c"`, "example 0", "0.5"}},
		{"no values to standardize", context.Background(), Config{Columns: []Column{Numeric("x", Standardize(), Default(1))}},
			[]dataset.Example{{}, {}}, []string{`column "x"`, "no values in the 2 records"}},
		{"no values for quantiles", context.Background(), Config{Columns: []Column{BucketizedQuantiles(Numeric("x", Default(1)), 2)}},
			nil, []string{`"x_bucketized"`, "no values"}},
		{"empty vocabulary", context.Background(), Config{Columns: []Column{VocabularyFromData("c")}},
			[]dataset.Example{{"c": by("")}}, []string{`"c"`, "empty vocabulary"}},
		{"a bad column first", context.Background(), Config{Columns: []Column{HashBucket("h", 0)}},
			nil, []string{`"h"`, "0 buckets"}},
		{"cancelled", cancelled, Config{Columns: []Column{VocabularyFromData("c")}},
			[]dataset.Example{{"c": by("a")}}, []string{"context canceled"}},
		{"a misspelled key", context.Background(), Config{Columns: []Column{Numeric("age"), HashBucket("jobb", 10)}},
			[]dataset.Example{{"age": fl(1), "job": by("a")}, {"age": fl(2)}},
			[]string{`no record of the 2 fitted on has feature "jobb"`, "the records have: age, job"}},
		{"a raw key of a cross", context.Background(), Config{Columns: []Column{Crossed([]Crossable{RawKey("cty"), RawKey("job")}, 10)}},
			[]dataset.Example{{"city": by("a"), "job": by("b")}}, []string{`feature "cty"`}},
		{"a weighted column's weights", context.Background(), Config{Columns: []Column{Weighted(Identity("tag", 3), "tag_weight")}},
			[]dataset.Example{{"tag": in(1), "tag_w": fl(0.5)}}, []string{`feature "tag_weight"`}},
		{"no records", context.Background(), Config{Columns: []Column{Numeric("x")}},
			nil, []string{`no record of the 0 fitted on has feature "x"`, "the records have: none"}},
		{"a nil column", context.Background(), Config{Columns: []Column{Numeric("x"), (*NumericColumn)(nil)}},
			[]dataset.Example{{"x": fl(1)}}, []string{"column 1 is nil"}},
		{"an embedding of a nil column", context.Background(), Config{Columns: []Column{Embedding((*VocabularyColumn)(nil), 2)}},
			[]dataset.Example{{"x": fl(1)}}, []string{"embedding column of a nil categorical column"}},
		{"before the statistics", context.Background(), Config{Columns: []Column{Numeric("agee", Standardize()), VocabularyFromData("cty")}},
			[]dataset.Example{{"age": fl(1), "city": by("a")}}, []string{`has features "agee", "cty"`, "the records have: age, city"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Fit(tc.ctx, source(tc.exs...), tc.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	_, err := Fit(context.Background(), failing{}, Config{Columns: []Column{VocabularyFromData("c")}})
	if !errors.Is(err, errRead) || !strings.Contains(err.Error(), "record 0") {
		t.Errorf("a source that fails: error %v, want one wrapping its error and naming record 0", err)
	}
}

var errRead = errors.New("disk on fire")

type failing struct{}

func (failing) Next() (dataset.Example, error) { return nil, errRead }
