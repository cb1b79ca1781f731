package tabular

import (
	"context"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/internal/wanterr"
)

func testPlan(head Head) *Plan {
	return &Plan{Label: "y", Head: head, Rows: 10, Features: []Feature{
		{Name: "x", Kind: Number, Raw: dataset.KindFloat, Mean: 2, Stddev: 1, QuantileBuckets: 10},
		{Name: "city", Kind: Vocabulary, Raw: dataset.KindBytes, Distinct: 3},
		{Name: "user", Kind: Hashed, Raw: dataset.KindBytes, Distinct: 3000, HashBuckets: 8192, EmbeddingDim: 32},
	}}
}

func TestPlanColumns(t *testing.T) {
	binary := Head{Kind: Binary, Classes: []string{"no", "yes"}, Raw: dataset.KindBytes}
	tests := []struct {
		model      Model
		all        []string
		wide, deep []string
	}{
		{Linear, []string{"x", "x_bucketized", "city", "user"}, []string{"x", "x_bucketized", "city", "user"}, nil},
		{DNN, []string{"x", "city_indicator", "user_embedding"}, nil, []string{"x", "city_indicator", "user_embedding"}},
		{WideDeep, []string{"x", "x_bucketized", "city", "city_indicator", "user", "user_embedding"},
			[]string{"x_bucketized", "city", "user"}, []string{"x", "city_indicator", "user_embedding"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.model), func(t *testing.T) {
			cs, err := testPlan(binary).Columns(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, c := range cs.Config.Columns {
				all = append(all, c.Name())
			}
			if diff := cmp.Diff(tc.all, all); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wide, cs.WideNames); diff != "" {
				t.Errorf("wide (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.deep, cs.DeepNames); diff != "" {
				t.Errorf("deep (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&columns.Label{Key: "y", Vocabulary: []string{"no", "yes"}, Dimension: 1, Int64: true}, cs.Config.Label); diff != "" {
				t.Errorf("label (-want +got):\n%s", diff)
			}
			// The DNN's numbers and the wide part's buckets read one
			// numeric column: its mean is the missing value's default.
			num := cs.Config.Columns[0].(*columns.NumericColumn)
			if diff := cmp.Diff([]float32{2}, num.DefaultValue()); diff != "" {
				t.Errorf("default (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanLabelAndHead(t *testing.T) {
	tests := []struct {
		name   string
		head   Head
		label  *columns.Label
		canned canned.Head
	}{
		{"binary strings", Head{Kind: Binary, Classes: []string{"no", "yes"}, Raw: dataset.KindBytes},
			&columns.Label{Key: "y", Vocabulary: []string{"no", "yes"}, Dimension: 1, Int64: true},
			canned.BinaryHead{LabelKey: "y", LabelVocabulary: []string{"no", "yes"}}},
		{"binary ids", Head{Kind: Binary, Classes: []string{"0", "1"}, Raw: dataset.KindInt64},
			&columns.Label{Key: "y", Dimension: 1}, canned.BinaryHead{LabelKey: "y"}},
		{"multi-class", Head{Kind: MultiClass, Classes: []string{"a", "b", "c"}, Raw: dataset.KindBytes},
			&columns.Label{Key: "y", Vocabulary: []string{"a", "b", "c"}, Dimension: 1, Int64: true},
			canned.MultiClassHead{LabelKey: "y", NClasses: 3, LabelVocabulary: []string{"a", "b", "c"}}},
		{"multi-class ids", Head{Kind: MultiClass, Classes: []string{"0", "1", "2"}, Raw: dataset.KindInt64},
			&columns.Label{Key: "y", Dimension: 1, Int64: true}, canned.MultiClassHead{LabelKey: "y", NClasses: 3}},
		{"regression", Head{Kind: Regression, Raw: dataset.KindFloat},
			&columns.Label{Key: "y", Dimension: 1}, canned.RegressionHead{LabelKey: "y"}},
		{"regression, scaled", Head{Kind: Regression, Raw: dataset.KindFloat, Mean: 4000, Stddev: 800},
			&columns.Label{Key: "y", Dimension: 1}, scaledRegression{RegressionHead: canned.RegressionHead{LabelKey: "y"}, Mean: 4000, Stddev: 800}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testPlan(tc.head)
			cs, err := p.Columns(WideDeep)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.label, cs.Config.Label); diff != "" {
				t.Errorf("label (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.canned, p.CannedHead()); diff != "" {
				t.Errorf("head (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanColumnsErrors(t *testing.T) {
	tests := []struct {
		name  string
		head  Head
		model Model
		want  string
	}{
		{"model", Head{Kind: Regression}, "boosted", `model "boosted": want linear, dnn or wide_deep`},
		{"binary numbers not 0/1", Head{Kind: Binary, Classes: []string{"1", "2"}, Raw: dataset.KindInt64}, DNN, "numeric labels 1 and 2 of a binary head must be 0 and 1"},
		{"classes not ids", Head{Kind: MultiClass, Classes: []string{"1", "2", "3"}, Raw: dataset.KindInt64}, DNN, "must be the class ids 0 to 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := testPlan(tc.head).Columns(tc.model)
			wanterr.Mentions(t, err, tc.want)
		})
	}
}

// TestPlanFitsAndParses: a plan's columns fit to the training CSV and
// turn its rows into a batch: a row whose numbers are all missing reads
// them as the mean (0 once standardized), the label as class ids.
func TestPlanFitsAndParses(t *testing.T) {
	files := []string{"testdata/penguins_species/train.csv"}
	schema, sample, err := Sample(files, 1000)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Infer(sample, InferOptions{Label: "species", Order: ColumnNames(schema)})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := p.Columns(WideDeep)
	if err != nil {
		t.Fatal(err)
	}
	csv := dataset.CSVOptions{Schema: p.CSVSchema(schema)}
	r, err := dataset.NewCSVReader(files, csv)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := columns.Fit(context.Background(), r, cs.Config)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	r, err = dataset.NewCSVReader(files, csv)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []dataset.Example
	for range 3 {
		ex, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, ex)
	}
	b, err := tr.Parse(rows)
	if err != nil {
		t.Fatal(err)
	}
	// Row 2 is "Torgersen,,,,,,Adelie".
	for _, f := range []string{"bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"} {
		x, ok := b.Features[f]
		if !ok {
			t.Fatalf("no feature %q in the batch (features %v)", f, keys(b.Features))
		}
		if v := x.Data().([]float32)[1]; math.Abs(float64(v)) > 1e-3 {
			t.Errorf("%s of the row without numbers: %v, want 0 (the mean, standardized)", f, v)
		}
	}
	y := b.Labels["species"]
	if y == nil {
		t.Fatalf("no label in the batch (labels %v)", keys(b.Labels))
	}
	if diff := cmp.Diff([]int64{0, 0, 0}, y.Data()); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

func keys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}
