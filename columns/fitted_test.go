package columns

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/dataset"
)

// TestFitted: the columns defined before Fit, or equal definitions made
// anew, come back as the Transformer fitted them; other settings, and
// columns the Transformer makes no feature of, are errors.
func TestFitted(t *testing.T) {
	city := VocabularyFromData("city")
	age := Numeric("age", Standardize())
	ageBuckets := BucketizedQuantiles(age, 2)
	color := VocabularyFromData("color")
	tr := mustFit(t, Config{Columns: []Column{Embedding(city, 2), ageBuckets, age, color}},
		dataset.Example{"city": by("Oslo"), "age": fl(20), "color": by("red")},
		dataset.Example{"city": by("Lima"), "age": fl(40), "color": by("red")},
		dataset.Example{"city": by("Oslo"), "age": fl(60), "color": by("blue")},
	)
	trAge, _ := tr.Column("age")
	trBuckets, _ := tr.Column("age_bucketized")
	tests := []struct {
		name  string
		c     Column
		want  Column // nil: an error saying err
		embed []string
		err   string
	}{
		{"numeric given to Fit", age, trAge, nil, ""},
		{"numeric anew", Numeric("age", Standardize()), trAge, nil, ""},
		{"bucketized given to Fit", ageBuckets, trBuckets, nil, ""},
		{"bucketized anew", BucketizedQuantiles(Numeric("age", Standardize()), 2), trBuckets, nil, ""},
		{"the Transformer's own", trBuckets, trBuckets, nil, ""},
		{"vocabulary inside an embedding", city, nil, []string{"Oslo", "Lima"}, ""},
		{"the embedding given to Fit", Embedding(city, 2), nil, []string{"Oslo", "Lima"}, ""},
		{"an embedding of the model's own", Embedding(VocabularyFromData("color"), 7), nil, []string{"red", "blue"}, ""},
		{"an embedding of the Transformer's name, another dimension", Embedding(VocabularyFromData("city"), 7), nil, nil, `column "city_embedding" is not the Transformer's column of that name`},
		{"other settings", Numeric("age"), nil, nil, `column "age" is not the Transformer's column of that name: their settings differ`},
		{"other quantiles", BucketizedQuantiles(Numeric("age", Standardize()), 3), nil, nil, "settings differ"},
		{"an embedding of another vocabulary", Embedding(VocabularyFromData("city", OOVBuckets(1)), 2), nil, nil, "settings differ"},
		{"an embedding of nothing the Transformer makes", Embedding(HashBucket("job", 5), 2), nil, nil, `the Transformer makes no feature "job" of its categorical column`},
		{"not the Transformer's", HashBucket("job", 5), nil, nil, `the Transformer makes no feature "job"`},
		{"data the Transformer did not see", Numeric("height", Standardize()), nil, nil, `has no standardized numeric column "height"`},
		{"nil", (*NumericColumn)(nil), nil, nil, "nil column"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tr.Fitted(tc.c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.fitted() {
				t.Errorf("%q is not fitted", got.Name())
			}
			if tc.want != nil && got != tc.want {
				t.Errorf("got %#v, want the Transformer's %#v", got, tc.want)
			}
			if tc.embed != nil {
				var v *VocabularyColumn
				switch g := got.(type) {
				case *VocabularyColumn:
					v = g
				case *EmbeddingColumn:
					v = g.cat.(*VocabularyColumn)
				}
				if v == nil {
					t.Fatalf("got a %T", got)
				}
				if diff := cmp.Diff(tc.embed, v.Vocabulary()); diff != "" {
					t.Errorf("vocabulary (-want +got):\n%s", diff)
				}
			}
		})
	}
}
