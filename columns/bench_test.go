package columns

import (
	"fmt"
	"testing"

	"github.com/towerflow/towerflow/dataset"
)

// censusLike is a fitted Transformer of census-like columns (numbers,
// bucketized, vocabulary, hash buckets, crosses, embeddings) and 256
// records for it.
func censusLike(b *testing.B) (*Transformer, []dataset.Example) {
	b.Helper()
	age := Numeric("age", Standardize())
	edu := VocabularyList("education", []string{"Bachelors", "HS-grad", "11th", "Masters", "9th", "Some-college", "Assoc-acdm", "Assoc-voc", "7th-8th", "Doctorate"}, OOVBuckets(1))
	occ := HashBucket("occupation", 1000)
	ageB := Bucketized(age, []float64{-1.5, -1, -0.5, 0, 0.5, 1, 1.5})
	cfg := Config{Columns: []Column{
		age, Numeric("hours", Default(40)), ageB, Indicator(edu), Embedding(occ, 8), edu, occ,
		Crossed([]Crossable{edu, RawKey("occupation")}, 10000),
		Crossed([]Crossable{ageB, edu, RawKey("occupation")}, 10000),
	}, Label: &Label{Key: "income", Vocabulary: []string{"<=50K", ">50K"}}}
	var exs []dataset.Example
	for i := range 256 {
		exs = append(exs, dataset.Example{
			"age":        fl(float32(20 + i%50)),
			"hours":      in(int64(30 + i%20)),
			"education":  by([]string{"Bachelors", "HS-grad", "Masters", "Preschool"}[i%4]),
			"occupation": by(fmt.Sprintf("occ-%d", i%15)),
			"income":     by([]string{"<=50K", ">50K"}[i%2]),
		})
	}
	tr, err := Fit(b.Context(), source(exs...), cfg)
	if err != nil {
		b.Fatal(err)
	}
	return tr, exs
}

// BenchmarkParse parses batches of 256 census-like records (numbers,
// bucketized, vocabulary, hash buckets, crosses, embeddings): b.N
// batches; rows/s is reported.
func BenchmarkParse(b *testing.B) {
	tr, exs := censusLike(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := tr.Parse(exs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(exs))/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkParseRows puts the batches of BenchmarkParse's records
// together from rows PrepareRow made once (a dataset.Pipeline with
// Cache, after its first epoch): b.N batches; rows/s is reported.
func BenchmarkParseRows(b *testing.B) {
	tr, exs := censusLike(b)
	rows := make([]any, len(exs))
	for i, ex := range exs {
		var err error
		if rows[i], err = tr.PrepareRow(ex); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := tr.ParseRows(rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(exs))/b.Elapsed().Seconds(), "rows/s")
}
