package columns

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/layers"
)

// everyKind is a configuration with a column of every kind and every
// setting, fitted to a few records, and records to parse with it.
func everyKind(t testing.TB) (*Transformer, []dataset.Example) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "vocab.txt")
	if err := os.WriteFile(file, []byte("north\nsouth\r\neast\nwest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	age := Numeric("age", Standardize(), Default(30))
	city := VocabularyFromData("city", MinCount(1), MaxSize(10), OOVBuckets(2))
	region := VocabularyFile("region", file, 3, DefaultID(0))
	occupation := VocabularyList("occupation", []string{"a", "b", "c"})
	shared := SharedEmbeddings([]CategoricalColumn{city, VocabularyFromData("home", OOVBuckets(2))}, 3, Combine(layers.CombineSqrtN))
	one := float32(1)
	cfg := Config{
		Columns: []Column{
			age,
			Numeric("pos", Shape(2, 1), Default(1, 2), Normalize(Normalizer{Mean: 0.1, Stddev: 3})),
			Bucketized(age, []float64{-1, 1e-7, 0.3}),
			BucketizedQuantiles(Numeric("income", Default(0)), 3),
			BucketizedQuantiles(Numeric("constant", Default(5)), 4), // one bucket
			Indicator(region),
			Embedding(HashBucket("word", 1000), 4, InitStddev(0.01)),
			Indicator(Identity("day", 7, IdentityDefault(6))),
			Crossed([]Crossable{RawKey("word"), Bucketized(age, []float64{0}), occupation}, 5000, HashKey(1<<63+12345)),
			Weighted(Identity("tag", 100), "tag_w"),
			shared[0], shared[1],
		},
		Label:  &Label{Key: "y", Vocabulary: []string{"no", "yes"}},
		Weight: &ExampleWeight{Key: "w", Default: &one},
	}
	exs := []dataset.Example{
		{"age": fl(22), "income": in(1000), "city": by("paris", "rome"), "home": by("oslo"), "region": by("south"), "word": by("hi"),
			"day": in(3), "occupation": by("b"), "tag": in(5, 99), "tag_w": fl(0.5, 1.5), "y": by("yes"), "w": fl(2)},
		{"age": fl(51.25), "income": fl(1e6), "city": by("paris"), "home": by("paris"), "region": by("nowhere"), "word": by("there", "hi"),
			"day": in(9), "occupation": by("c", "a"), "pos": fl(3, 4), "y": by("no")},
		{"income": fl(12.5), "city": by("lima"), "home": by("bern"), "y": by("no")},
	}
	tr, err := Fit(context.Background(), source(exs...), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr, exs
}

// TestJSONRoundTrip encodes a transformer of every kind of column and
// loads it back: the same columns (vocabularies, boundaries, statistics,
// hash settings), the same JSON, the same batches.
func TestJSONRoundTrip(t *testing.T) {
	tr, exs := everyKind(t)
	data, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Load(data)
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(tr.Config(), back.Config()) {
		t.Errorf("loaded configuration differs:\n%#v\n%#v", tr.Config(), back.Config())
	}
	again, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Errorf("JSON differs after a round trip:\n%s\n%s", data, again)
	}
	want, err := tr.Parse(exs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.Parse(exs)
	if err != nil {
		t.Fatal(err)
	}
	diffBatchIn(t, want, got, "-want +got")
	if len(want.Features) != len(got.Features) || len(want.Sparse) != len(got.Sparse) || len(want.Labels) != len(got.Labels) {
		t.Errorf("loaded transformer makes %d/%d/%d features/sparse/labels, want %d/%d/%d",
			len(got.Features), len(got.Sparse), len(got.Labels), len(want.Features), len(want.Sparse), len(want.Labels))
	}
	var u Transformer
	if err := json.Unmarshal(data, &u); err != nil || !reflect.DeepEqual(u.Config(), tr.Config()) {
		t.Errorf("json.Unmarshal into a Transformer: %v, equal %v", err, reflect.DeepEqual(u.Config(), tr.Config()))
	}
	if tr.PreprocessKind() != "towerflow/columns" {
		t.Errorf("PreprocessKind = %q", tr.PreprocessKind())
	}
}

func TestLoadErrors(t *testing.T) {
	tr, _ := everyKind(t)
	good, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, json, says string
	}{
		{"not JSON", "{", "unexpected EOF"},
		{"other kind", `{"kind":"other","version":1,"columns":[]}`, `kind "other"`},
		{"other version", `{"kind":"towerflow/columns","version":2,"columns":[]}`, "version 2"},
		{"unknown field", `{"kind":"towerflow/columns","version":1,"colums":[]}`, "colums"},
		{"unknown type", `{"kind":"towerflow/columns","version":1,"columns":[{"type":"magic"}]}`, `unknown column type "magic"`},
		{"unfitted", `{"kind":"towerflow/columns","version":1,"columns":[{"type":"vocabulary","key":"c","from_data":true}]}`, "needs statistics"},
		{"bad hash key", `{"kind":"towerflow/columns","version":1,"columns":[{"type":"crossed","buckets":3,"hash_key":"-1","keys":[{"type":"raw","key":"a"},{"type":"raw","key":"b"}]}]}`, `hash key "-1"`},
		{"indicator of a numeric", `{"kind":"towerflow/columns","version":1,"columns":[{"type":"indicator","categorical":{"type":"numeric","key":"x","shape":[1]}}]}`, "not categorical"},
		{"trailing data", string(good) + "{}", "after the transformer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
}
