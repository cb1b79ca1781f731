package columns

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/dataset"
)

// TestPipelineParser runs a Transformer as a dataset.Pipeline's Parser
// over a CSV file on two workers: the batches are Parse's of the file's
// records, and an error about a record names the file and the record.
func TestPipelineParser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "people.csv")
	csv := "age,city,day,score\n30,Oslo,1,0.5\n41,Lima,6,1.5\n,Oslo,3,2\n25,Rome,0,0.25\n"
	if err := os.WriteFile(path, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	schema := dataset.Schema{
		{Name: "age", Kind: dataset.KindFloat, Optional: true, Default: "NaN"},
		{Name: "city", Kind: dataset.KindBytes},
		{Name: "day", Kind: dataset.KindInt64},
		{Name: "score", Kind: dataset.KindFloat},
	}
	city := VocabularyList("city", []string{"Oslo", "Lima"}, OOVBuckets(1))
	tr := mustTransformer(t, Config{Columns: []Column{Numeric("age", Default(35)), Indicator(city), Embedding(Identity("day", 7), 2), Crossed([]Crossable{city, RawKey("day")}, 50)}})

	r, err := dataset.NewCSVReader([]string{path}, dataset.CSVOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	var exs []dataset.Example
	for ex, err := r.Next(); err == nil; ex, err = r.Next() {
		exs = append(exs, ex)
	}
	r.Close()
	want, err := tr.Parse(exs[:2])
	if err != nil {
		t.Fatal(err)
	}
	in, err := dataset.Pipeline{Files: []string{path}, CSV: &dataset.CSVOptions{Schema: schema}, Parser: tr, BatchSize: 2, Workers: 2}.Input()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for b, err := range in(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			diffBatchIn(t, want, b, "-Parse +pipeline")
		}
		if n == 1 && b.Features["age"].Data().([]float32)[0] != 35 {
			t.Errorf("the empty age (NaN) is %v, want the default 35", b.Features["age"].Data())
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d batches, want 2", n)
	}

	bad := mustTransformer(t, Config{Columns: []Column{Indicator(VocabularyList("score", []string{"a"}))}})
	in, err = dataset.Pipeline{Files: []string{path}, CSV: &dataset.CSVOptions{Schema: schema}, Parser: bad, BatchSize: 2, Workers: 2}.Input()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range in(context.Background()) {
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `feature "score"`) || !strings.Contains(err.Error(), "0.5") {
			t.Errorf("a float in a vocabulary column: error %v, want one naming the file, the feature and the value", err)
		}
		break
	}
}

// A Transformer in a Pipeline with Cache prepares each record once
// (dataset.RowParser) and makes, epoch after epoch, the batches it makes
// without.
func TestPipelineCacheRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.csv")
	var csv strings.Builder
	csv.WriteString("age,city,day,w,y\n")
	cities := []string{"Oslo", "Lima", "Rome", ""}
	for i := range 37 {
		fmt.Fprintf(&csv, "%d,%s,%d,%g,%d\n", 18+i%50, cities[i%4], i%7, 0.5+float64(i%3), i%3)
	}
	if err := os.WriteFile(path, []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	schema := dataset.Schema{
		{Name: "age", Kind: dataset.KindFloat}, {Name: "city", Kind: dataset.KindBytes, Optional: true}, {Name: "day", Kind: dataset.KindInt64},
		{Name: "w", Kind: dataset.KindFloat}, {Name: "y", Kind: dataset.KindInt64},
	}
	city := VocabularyList("city", []string{"Oslo", "Lima"}, OOVBuckets(1))
	age := Numeric("age")
	tr := mustTransformer(t, Config{
		Columns: []Column{age, Bucketized(age, []float64{30, 50}), Indicator(city), city, Embedding(Identity("day", 7), 2),
			Crossed([]Crossable{city, RawKey("day")}, 50), Weighted(HashBucket("city", 10), "w")},
		Label:  &Label{Key: "y", Int64: true},
		Weight: &ExampleWeight{Key: "w"},
	})
	read := func(cache bool) []map[string]any {
		t.Helper()
		in, err := dataset.Pipeline{Files: []string{path}, CSV: &dataset.CSVOptions{Schema: schema}, Parser: tr, BatchSize: 8,
			Epochs: 3, ShuffleBuffer: 10, Seed: 5, Workers: 2, Cache: cache}.Input()
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for b, err := range in(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, plainBatch(b))
		}
		return out
	}
	want := read(false)
	if diff := cmp.Diff(want, read(true)); diff != "" {
		t.Errorf("with Cache (-without +with):\n%s", diff)
	}
}
