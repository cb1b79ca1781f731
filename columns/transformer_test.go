package columns

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/sharding"
)

func fl(v ...float32) dataset.Feature { return dataset.Feature{Floats: v} }
func in(v ...int64) dataset.Feature   { return dataset.Feature{Int64s: v} }
func by(v ...string) dataset.Feature {
	b := make([][]byte, len(v))
	for i, s := range v {
		b[i] = []byte(s)
	}
	return dataset.Feature{Bytes: b}
}

// sparse is a SparseCOO in plain values for comparison.
type sparse struct {
	Indices [][]int
	Values  any
	Shape   []int
}

func plain(s sharding.SparseCOO) sparse {
	var v any
	if s.Values != nil && s.Values.Shape().TotalSize() > 0 {
		v = s.Values.Data()
	}
	idx := s.Indices
	if len(idx) == 0 {
		idx = nil
	}
	return sparse{Indices: idx, Values: v, Shape: s.DenseShape}
}

// dense is a dense tensor in plain values for comparison.
type dense struct {
	Shape []int
	Data  any
}

func plainDense(t *tensor.Dense) dense { return dense{Shape: t.Shape(), Data: t.Data()} }

// plainBatch is a batch's features, sparse features and labels in plain
// values, by name.
func plainBatch(b sharding.Batch) map[string]any {
	out := map[string]any{}
	for k, v := range b.Features {
		out["feature "+k] = plainDense(v)
	}
	for k, v := range b.Sparse {
		out["sparse "+k] = plain(v)
	}
	for k, v := range b.Labels {
		out["label "+k] = plainDense(v)
	}
	return out
}

// diffBatchIn reports each feature, sparse feature and label of want
// that got holds otherwise; diff says what -want and +got are.
func diffBatchIn(t *testing.T, want, got sharding.Batch, diff string) {
	t.Helper()
	g := plainBatch(got)
	for k, w := range plainBatch(want) {
		if d := cmp.Diff(w, g[k]); d != "" {
			t.Errorf("%s (%s):\n%s", k, diff, d)
		}
	}
}

func mustTransformer(t *testing.T, cfg Config) *Transformer {
	t.Helper()
	tr, err := NewTransformer(cfg)
	if err != nil {
		t.Fatalf("NewTransformer: %v", err)
	}
	return tr
}

// wantRecordError checks that err is a *dataset.ParseError about record
// and feature whose message has every one of parts.
func wantRecordError(t *testing.T, err error, record int, feature string, parts ...string) {
	t.Helper()
	var pe *dataset.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *dataset.ParseError", err)
	}
	if pe.Example != record || pe.Feature != feature {
		t.Errorf("error %q is about record %d feature %q, want record %d feature %q", err, pe.Example, pe.Feature, record, feature)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}

func TestParseNumeric(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		col  *NumericColumn
		exs  []dataset.Example
		want dense
	}{
		{"floats and ints", Numeric("x"), []dataset.Example{{"x": fl(1.5)}, {"x": in(-3)}},
			dense{[]int{2, 1}, []float32{1.5, -3}}},
		{"missing takes the default", Numeric("x", Default(7)), []dataset.Example{{"x": fl(1)}, {}, {"x": fl()}, {"x": fl(nan)}},
			dense{[]int{4, 1}, []float32{1, 7, 7, 7}}},
		{"shape [2, 2], default per element", Numeric("x", Shape(2, 2), Default(1, 2, 3, 4)),
			[]dataset.Example{{"x": fl(5, 6, 7, 8)}, {}, {"x": fl(0, nan, 0, 0)}},
			dense{[]int{3, 2, 2}, []float32{5, 6, 7, 8, 1, 2, 3, 4, 0, 2, 0, 0}}},
		{"normalizer", Numeric("x", Normalize(Normalizer{Mean: 10, Stddev: 4}), Default(2)), []dataset.Example{{"x": fl(14)}, {}},
			dense{[]int{2, 1}, []float32{1, -2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := mustTransformer(t, Config{Columns: []Column{tc.col}}).Parse(tc.exs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, plainDense(b.Features["x"])); diff != "" {
				t.Errorf("x (-want +got):\n%s", diff)
			}
			if _, err := b.Rows(); err != nil {
				t.Errorf("batch: %v", err)
			}
		})
	}
}

func TestParseNumericErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		col    *NumericColumn
		exs    []dataset.Example
		record int
		says   []string
	}{
		{"missing without default", Numeric("x"), []dataset.Example{{"x": fl(1)}, {"y": fl(1)}}, 1, []string{"missing", "no default"}},
		{"NaN without default", Numeric("x"), []dataset.Example{{"x": fl(nan32())}}, 0, []string{"missing", "no default"}},
		{"too many values", Numeric("x"), []dataset.Example{{"x": fl(1)}, {"x": fl(1)}, {"x": fl(1, 2)}}, 2, []string{"2 values", "[1]", "wants 1"}},
		{"too few for the shape", Numeric("x", Shape(3)), []dataset.Example{{"x": fl(1, 2)}}, 0, []string{"2 values", "[3]"}},
		{"a string", Numeric("x"), []dataset.Example{{"x": by("abc")}}, 0, []string{`"abc"`, "bytes list", "floats or int64s"}},
		{"infinite", Numeric("x"), []dataset.Example{{"x": fl(float32(math.Inf(1)))}}, 0, []string{"+Inf", "not finite"}},
		{"two lists", Numeric("x"), []dataset.Example{{"x": dataset.Feature{Floats: []float32{1}, Int64s: []int64{1}}}}, 0, []string{"2 value lists"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mustTransformer(t, Config{Columns: []Column{tc.col}}).Parse(tc.exs)
			wantRecordError(t, err, tc.record, "x", tc.says...)
		})
	}
}

func nan32() float32 { return float32(math.NaN()) }

// TestParseBucketized checks TensorFlow's bucketized_column example:
// boundaries [0, 10, 100], values [[-5, 10000], [150, 10], [5, 100]] are
// in buckets [[0, 3], [3, 2], [1, 3]]; the second value's ids are offset
// by the 4 buckets of the first.
func TestParseBucketized(t *testing.T) {
	col := Bucketized(Numeric("price", Shape(2)), []float64{0, 10, 100})
	b, err := mustTransformer(t, Config{Columns: []Column{col}}).Parse([]dataset.Example{
		{"price": fl(-5, 10000)}, {"price": fl(150, 10)}, {"price": fl(5, 100)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := sparse{
		Indices: [][]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}},
		Values:  []int64{0, 4 + 3, 3, 4 + 2, 1, 4 + 3},
		Shape:   []int{3, 2},
	}
	if diff := cmp.Diff(want, plain(b.Sparse["price_bucketized"])); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	oneHot := dense{[]int{3, 8}, []float32{
		1, 0, 0, 0, 0, 0, 0, 1,
		0, 0, 0, 1, 0, 0, 1, 0,
		0, 1, 0, 0, 0, 0, 0, 1,
	}}
	if diff := cmp.Diff(oneHot, plainDense(b.Features["price_bucketized_indicator"])); diff != "" {
		t.Errorf("one-hot (-want +got):\n%s", diff)
	}
	if _, err := b.Rows(); err != nil {
		t.Errorf("batch: %v", err)
	}
}

func TestParseCategorical(t *testing.T) {
	// "Hello" and "TensorFlow" hash to buckets 0 and 2 of 3
	// (tf.strings.to_hash_bucket_fast's documented example).
	vocab := []string{"a", "b"}
	for _, tc := range []struct {
		name string
		col  CategoricalColumn
		exs  []dataset.Example
		want sparse
	}{
		{"vocabulary, OOV buckets", VocabularyList("k", vocab, OOVBuckets(3)),
			[]dataset.Example{{"k": by("b", "Hello", "a")}, {"k": by("TensorFlow")}},
			sparse{[][]int{{0, 0}, {0, 1}, {0, 2}, {1, 0}}, []int64{1, 2 + 0, 0, 2 + 2}, []int{2, 3}}},
		{"vocabulary, default id", VocabularyList("k", vocab, DefaultID(1)),
			[]dataset.Example{{"k": by("zzz", "a")}},
			sparse{[][]int{{0, 0}, {0, 1}}, []int64{1, 0}, []int{1, 2}}},
		{"vocabulary, unknown dropped", VocabularyList("k", vocab),
			[]dataset.Example{{"k": by("zzz", "b")}, {"k": by("zzz")}},
			sparse{[][]int{{0, 0}}, []int64{1}, []int{2, 1}}},
		{"vocabulary of integers", VocabularyList("k", []string{"10", "-3"}),
			[]dataset.Example{{"k": in(-3, 10, 4)}},
			sparse{[][]int{{0, 0}, {0, 1}}, []int64{1, 0}, []int{1, 2}}},
		{"missing feature is an empty bag", VocabularyList("k", vocab),
			[]dataset.Example{{}, {"k": by("a")}, {"k": by()}},
			sparse{[][]int{{1, 0}}, []int64{0}, []int{3, 1}}},
		{"vocabulary: an empty string is missing, not out of vocabulary", VocabularyList("k", vocab, OOVBuckets(3)),
			[]dataset.Example{{"k": by("")}, {"k": by("", "a")}},
			sparse{[][]int{{1, 0}}, []int64{0}, []int{2, 1}}},
		{"vocabulary: an empty string does not take the default", VocabularyList("k", vocab, DefaultID(1)),
			[]dataset.Example{{"k": by("b", "")}},
			sparse{[][]int{{0, 0}}, []int64{1}, []int{1, 1}}},
		{"hash buckets: an empty string is missing", HashBucket("k", 3),
			[]dataset.Example{{"k": by("", "Hello")}, {"k": by("")}},
			sparse{[][]int{{0, 0}}, []int64{0}, []int{2, 1}}},
		{"identity: an empty list of any kind is an empty bag", Identity("k", 5),
			[]dataset.Example{{"k": by()}, {"k": fl()}, {"k": in(4)}},
			sparse{[][]int{{2, 0}}, []int64{4}, []int{3, 1}}},
		{"no ids in the batch", VocabularyList("k", vocab),
			[]dataset.Example{{}, {}},
			sparse{nil, nil, []int{2, 1}}},
		{"hash buckets", HashBucket("k", 3),
			[]dataset.Example{{"k": by("Hello", "TensorFlow", "2.x")}},
			sparse{[][]int{{0, 0}, {0, 1}, {0, 2}}, []int64{0, 2, 2}, []int{1, 3}}},
		{"hash buckets of an integer: its decimal string", HashBucket("k", 1000),
			[]dataset.Example{{"k": in(12345)}, {"k": by("12345")}},
			sparse{[][]int{{0, 0}, {1, 0}}, []int64{HashBucketID([]byte("12345"), 1000), HashBucketID([]byte("12345"), 1000)}, []int{2, 1}}},
		{"identity: negative dropped", Identity("k", 5),
			[]dataset.Example{{"k": in(4, -1, 0)}},
			sparse{[][]int{{0, 0}, {0, 1}}, []int64{4, 0}, []int{1, 2}}},
		{"identity: default", Identity("k", 5, IdentityDefault(2)),
			[]dataset.Example{{"k": in(4, -1, 7)}},
			sparse{[][]int{{0, 0}, {0, 1}, {0, 2}}, []int64{4, 2, 2}, []int{1, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := mustTransformer(t, Config{Columns: []Column{tc.col}}).Parse(tc.exs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, plain(b.Sparse["k"])); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if _, err := b.Rows(); err != nil {
				t.Errorf("batch: %v", err)
			}
			if err := b.Sparse["k"].Validate(); err != nil {
				t.Errorf("sparse feature: %v", err)
			}
		})
	}
}

func TestParseCategoricalErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		col    CategoricalColumn
		exs    []dataset.Example
		record int
		says   []string
	}{
		{"identity: a string", Identity("k", 5), []dataset.Example{{"k": in(1)}, {"k": by("three")}}, 1, []string{`"three"`, "string", "identity"}},
		{"identity: beyond the buckets", Identity("k", 5), []dataset.Example{{"k": in(5)}}, 0, []string{"value 5", "[0, 5)"}},
		{"identity: a float", Identity("k", 5), []dataset.Example{{"k": fl(1.5)}}, 0, []string{"1.5", "float"}},
		{"vocabulary: a float", VocabularyList("k", []string{"a"}), []dataset.Example{{"k": fl(2.5)}}, 0, []string{"2.5", "float", "vocabulary column"}},
		{"hash: a float", HashBucket("k", 5), []dataset.Example{{"k": in(1)}, {"k": in(1)}, {"k": fl(0.25)}}, 2, []string{"0.25", "float"}},
		{"weights: NaN", Weighted(HashBucket("c", 5), "k"), []dataset.Example{{"c": by("a"), "k": fl(1)}, {"c": by("a", "b"), "k": fl(2, float32(math.NaN()))}}, 1, []string{"weight NaN (element 1)", "not finite", `weighted column "c_weighted_by_k"`}},
		{"weights: infinite", Weighted(Identity("c", 5), "k"), []dataset.Example{{"c": in(1), "k": fl(float32(math.Inf(-1)))}}, 0, []string{"weight -Inf (element 0)", "not finite"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mustTransformer(t, Config{Columns: []Column{tc.col}}).Parse(tc.exs)
			wantRecordError(t, err, tc.record, "k", tc.says...)
		})
	}
}

// TestParseCrossed checks the cross's ids against TensorFlow's
// sparse_cross_hashed tests (the cross of "batch1-FC1-F1",
// "batch1-FC2-F1" and "batch1-FC3-F1" into 100 buckets is 83; with the
// hash key DefaultHashKey+1, 31), and the order and count of a record's
// crosses.
func TestParseCrossed(t *testing.T) {
	keys := []Crossable{RawKey("a"), RawKey("b"), RawKey("c")}
	one := dataset.Example{"a": by("batch1-FC1-F1"), "b": by("batch1-FC2-F1"), "c": by("batch1-FC3-F1")}
	for _, tc := range []struct {
		name string
		col  *CrossedColumn
		exs  []dataset.Example
		want sparse
	}{
		{"TensorFlow's default key", Crossed(keys, 100), []dataset.Example{one},
			sparse{[][]int{{0, 0}}, []int64{83}, []int{1, 1}}},
		{"TensorFlow's key+1", Crossed(keys, 100, HashKey(DefaultHashKey+1)), []dataset.Example{one},
			sparse{[][]int{{0, 0}}, []int64{31}, []int{1, 1}}},
		{"nested cross flattened", Crossed([]Crossable{Crossed(keys[:2], 7), keys[2]}, 100), []dataset.Example{one},
			sparse{[][]int{{0, 0}}, []int64{83}, []int{1, 1}}},
		{"an integer crosses as its string", Crossed(keys, 100),
			[]dataset.Example{{"a": in(1), "b": by("batch1-FC2-F1"), "c": by("batch1-FC3-F1")}, {"a": by("1"), "b": by("batch1-FC2-F1"), "c": by("batch1-FC3-F1")}},
			sparse{[][]int{{0, 0}, {1, 0}}, []int64{crossOf("1", "batch1-FC2-F1", "batch1-FC3-F1"), crossOf("1", "batch1-FC2-F1", "batch1-FC3-F1")}, []int{2, 1}}},
		{"a key missing: no crosses", Crossed(keys, 100), []dataset.Example{{"a": by("x"), "b": by("y")}, one},
			sparse{[][]int{{1, 0}}, []int64{83}, []int{2, 1}}},
		{"an empty string is missing: no crosses", Crossed(keys, 100), []dataset.Example{{"a": by("x"), "b": by("y"), "c": by("")}, one},
			sparse{[][]int{{1, 0}}, []int64{83}, []int{2, 1}}},
		{"a key's empty string left out", Crossed(keys, 100), []dataset.Example{{"a": by("", "batch1-FC1-F1"), "b": by("batch1-FC2-F1"), "c": by("batch1-FC3-F1")}},
			sparse{[][]int{{0, 0}}, []int64{83}, []int{1, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := mustTransformer(t, Config{Columns: []Column{tc.col}}).Parse(tc.exs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, plain(b.Sparse[tc.col.Name()])); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}

	// 3×1×2 values: 6 crosses, the last key varying fastest, each the
	// cross of its values; a raw integer hashes as its decimal string, a
	// categorical column's id as itself.
	age := Bucketized(Numeric("age"), []float64{18, 65})
	col := Crossed([]Crossable{RawKey("a"), age, RawKey("n")}, 1<<40)
	b, err := mustTransformer(t, Config{Columns: []Column{col}}).Parse([]dataset.Example{
		{"a": by("x", "y", "z"), "age": fl(30), "n": in(7, -2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, a := range []string{"x", "y", "z"} {
		for _, n := range []int64{7, -2} {
			want = append(want, crossHash(DefaultHashKey, []uint64{Fingerprint64([]byte(a)), 1, Fingerprint64([]byte(strconv.FormatInt(n, 10)))}, 1<<40))
		}
	}
	got := plain(b.Sparse["a_X_age_bucketized_X_n"])
	if diff := cmp.Diff(sparse{[][]int{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}}, want, []int{1, 6}}, got); diff != "" {
		t.Errorf("3×1×2 cross (-want +got):\n%s", diff)
	}

	_, err = NewTransformer(Config{Columns: []Column{Crossed([]Crossable{HashBucket("a", 10), RawKey("b")}, 10)}})
	if err == nil || !strings.Contains(err.Error(), `RawKey("a")`) {
		t.Errorf("crossing a hash bucket column: error %v, want one saying to cross RawKey(\"a\")", err)
	}
	_, err = mustTransformer(t, Config{Columns: []Column{Crossed(keys, 10)}}).Parse([]dataset.Example{{"a": by("x"), "b": fl(1), "c": by("z")}})
	wantRecordError(t, err, 0, "b", "float", "a_X_b_X_c")
}

// TestParseCrossedLimit checks MaxCrosses: a record whose keys make up to
// the limit's combinations crosses, one that makes more is an error of
// that record naming the column, its keys' counts, their product and the
// limit.
func TestParseCrossedLimit(t *testing.T) {
	vals := func(prefix string, n int) dataset.Feature {
		v := make([]string, n)
		for i := range v {
			v[i] = prefix + strconv.Itoa(i)
		}
		return by(v...)
	}
	ab := []Crossable{RawKey("a"), RawKey("b")}
	abc := []Crossable{RawKey("a"), RawKey("b"), RawKey("c")}
	// 64 keys of 2 values each: 2⁶⁴ combinations, which an int's product
	// wraps to 0.
	wide, wideEx := make([]Crossable, 64), dataset.Example{}
	for i := range wide {
		k := "k" + strconv.Itoa(i)
		wide[i], wideEx[k] = RawKey(k), vals("v", 2)
	}
	for _, tc := range []struct {
		name  string
		col   *CrossedColumn
		exs   []dataset.Example
		most  map[string]int // ParseBounded's, when not nil
		ids   int            // the batch's ids of col, when no error (-1: not counted)
		err   int            // the record of the error, or -1
		parts []string       // what the error says
		cols  []Column       // the transformer's columns, when not just col
	}{
		{"at the limit", Crossed(ab, 100, MaxCrosses(6)), []dataset.Example{{"a": vals("a", 2), "b": vals("b", 3)}}, nil, 6, -1, nil, nil},
		{"over the limit", Crossed(ab, 100, MaxCrosses(6)),
			[]dataset.Example{{"a": vals("a", 2), "b": vals("b", 3)}, {"a": vals("a", 2), "b": vals("b", 4)}}, nil, 0, 1, []string{"keys a (2 values) × b (4 values) make 8 combinations", "MaxCrosses 6"}, nil},
		{"a limit of 1", Crossed(ab, 100, MaxCrosses(1)), []dataset.Example{{"a": vals("a", 1), "b": vals("b", 1)}}, nil, 1, -1, nil, nil},
		{"at the default limit", Crossed(ab, 100), []dataset.Example{{"a": vals("a", 16), "b": vals("b", DefaultMaxCrosses/16)}}, nil, DefaultMaxCrosses, -1, nil, nil},
		{"over the default limit", Crossed(ab, 100), []dataset.Example{{"a": vals("a", 17), "b": vals("b", DefaultMaxCrosses/16)}}, nil, 0, 0, []string{"a (17 values) × b (16 values) make 272 combinations", "MaxCrosses 256"}, nil},
		{"over the limit at the first key", Crossed(abc, 100, MaxCrosses(4)),
			[]dataset.Example{{"a": vals("a", 5), "b": vals("b", 1), "c": vals("c", 1)}}, nil, 0, 0, []string{"a (5 values) × b (1 values) × c (1 values) make 5 combinations"}, nil},
		{"over the limit at the last key", Crossed(abc, 100, MaxCrosses(8)),
			[]dataset.Example{{"a": vals("a", 2), "b": vals("b", 2), "c": vals("c", 3)}}, nil, 0, 0, []string{"make 12 combinations", "MaxCrosses 8"}, nil},
		{"a key without values makes no crosses", Crossed(abc, 100, MaxCrosses(1)),
			[]dataset.Example{{"a": vals("a", 50), "b": vals("b", 50)}}, nil, 0, -1, nil, nil},
		{"values a categorical key drops do not count", Crossed([]Crossable{VocabularyList("v", []string{"x", "y"}), RawKey("b")}, 100, MaxCrosses(4)),
			[]dataset.Example{{"v": by("x", "unknown", "y", "other"), "b": vals("b", 2)}}, nil, 4, -1, nil, nil},
		{"a nested cross's limit does not carry over", Crossed([]Crossable{Crossed(ab, 10, MaxCrosses(1)), RawKey("c")}, 100),
			[]dataset.Example{{"a": vals("a", 2), "b": vals("b", 1), "c": vals("c", 1)}}, nil, 2, -1, nil, nil},
		{"the largest limit", Crossed(ab, 100, MaxCrosses(math.MaxInt)), []dataset.Example{{"a": vals("a", 3), "b": vals("b", 7)}}, nil, 21, -1, nil, nil},
		{"bounded by the consumer", Crossed(ab, 100, MaxCrosses(20)), []dataset.Example{{"a": vals("a", 3), "b": vals("b", 3)}}, map[string]int{"a_X_b": 8},
			0, 0, []string{"make 9 combinations", "more than the serving signature takes (at most 8 an example)"}, nil},
		{"at the consumer's bound", Crossed(ab, 100, MaxCrosses(20)), []dataset.Example{{"a": vals("a", 2), "b": vals("b", 4)}}, map[string]int{"a_X_b": 8}, 8, -1, nil, nil},
		{"MaxCrosses under the consumer's bound", Crossed(ab, 100, MaxCrosses(6)), []dataset.Example{{"a": vals("a", 2), "b": vals("b", 4)}}, map[string]int{"a_X_b": 8},
			0, 0, []string{"make 8 combinations", "MaxCrosses 6"}, nil},
		{"another feature's bound", Crossed(ab, 100, MaxCrosses(20)), []dataset.Example{{"a": vals("a", 3), "b": vals("b", 3)}}, map[string]int{"a": 1, "b": 1}, 9, -1, nil, nil},
		{"a weighted cross bounded by its feature's width", Crossed(ab, 100), []dataset.Example{{"a": vals("a", 2), "b": vals("b", 2), "w": fl(1, 2, 3, 4)}}, map[string]int{"a_X_b_weighted_by_w": 3},
			0, 0, []string{"make 4 combinations", "the serving signature takes (at most 3 an example)"}, []Column{Weighted(Crossed(ab, 100), "w")}},
		{"a cross read only densely is not bounded by a feature of its name", Crossed(ab, 100), []dataset.Example{{"a": vals("a", 2), "b": vals("b", 2), "a_X_b": vals("h", 1)}}, map[string]int{"a_X_b": 1},
			-1, -1, nil, []Column{Indicator(Crossed(ab, 100)), HashBucket("a_X_b", 10)}},
		{"beyond an int", Crossed(wide, 100, MaxCrosses(math.MaxInt)), []dataset.Example{wideEx}, nil, 0, 0, []string{"make 18446744073709551616 combinations"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols := tc.cols
			if cols == nil {
				cols = []Column{tc.col}
			}
			tr := mustTransformer(t, Config{Columns: cols})
			b, err := tr.Parse(tc.exs)
			if tc.most != nil {
				if _, err := tr.Parse(tc.exs); err != nil && !strings.Contains(err.Error(), "MaxCrosses") {
					t.Errorf("Parse without the bounds: %v", err)
				}
				b, err = tr.ParseBounded(tc.exs, tc.most)
			}
			if tc.err >= 0 {
				wantRecordError(t, err, tc.err, tc.col.Name(), tc.parts...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.ids < 0 {
				return
			}
			if diff := cmp.Diff(tc.ids, len(plain(b.Sparse[tc.col.Name()]).Indices)); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseWeightedAndIndicator(t *testing.T) {
	city := VocabularyList("city", []string{"a", "b", "c"})
	w := Weighted(city, "w")
	tr := mustTransformer(t, Config{Columns: []Column{w, Indicator(city), Indicator(w)}})
	b, err := tr.Parse([]dataset.Example{
		{"city": by("a", "c", "a"), "w": fl(0.5, 2, 0.25)},
		{"city": by("zzz", "b"), "w": fl(9, 3)}, // the dropped value drops its weight
		{},
	})
	if err != nil {
		t.Fatal(err)
	}
	idx := [][]int{{0, 0}, {0, 1}, {0, 2}, {1, 0}}
	if diff := cmp.Diff(sparse{idx, []int64{0, 2, 0, 1}, []int{3, 3}}, plain(b.Sparse["city_weighted_by_w"])); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sparse{idx, []float32{0.5, 2, 0.25, 3}, []int{3, 3}}, plain(b.Sparse["city_weighted_by_w_weights"])); diff != "" {
		t.Errorf("weights (-want +got):\n%s", diff)
	}
	// Counts for repeats, as TensorFlow's indicator_column.
	if diff := cmp.Diff(dense{[]int{3, 3}, []float32{2, 0, 1, 0, 1, 0, 0, 0, 0}}, plainDense(b.Features["city_indicator"])); diff != "" {
		t.Errorf("indicator (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(dense{[]int{3, 3}, []float32{0.75, 0, 2, 0, 3, 0, 0, 0, 0}}, plainDense(b.Features["city_weighted_by_w_indicator"])); diff != "" {
		t.Errorf("weighted indicator (-want +got):\n%s", diff)
	}
	if _, err := b.Rows(); err != nil {
		t.Errorf("batch: %v", err)
	}

	_, err = tr.Parse([]dataset.Example{{"city": by("a", "b"), "w": fl(1)}})
	wantRecordError(t, err, 0, "w", "1 weights for 2 values")
	_, err = tr.Parse([]dataset.Example{{"city": by("a"), "w": by("heavy")}})
	wantRecordError(t, err, 0, "w", `"heavy"`, "string", "numbers")
	_, err = tr.Parse([]dataset.Example{{"city": by("a"), "w": by()}})
	wantRecordError(t, err, 0, "w", "0 weights for 1 values")
	b, err = tr.Parse([]dataset.Example{{"city": by("a", "b"), "w": in(3, 4)}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{3, 4}, b.Sparse["city_weighted_by_w_weights"].Values.Data()); diff != "" {
		t.Errorf("integer weights (-want +got):\n%s", diff)
	}
}

func TestParseLabels(t *testing.T) {
	x := Numeric("x", Default(0))
	one := float32(1)
	for _, tc := range []struct {
		name string
		cfg  Config
		exs  []dataset.Example
		want map[string]dense
	}{
		{"float labels", Config{Columns: []Column{x}, Label: &Label{Key: "y"}},
			[]dataset.Example{{"y": fl(0.5)}, {"y": in(2)}},
			map[string]dense{"y": {[]int{2, 1}, []float32{0.5, 2}}}},
		{"class ids", Config{Columns: []Column{x}, Label: &Label{Key: "y", Int64: true}},
			[]dataset.Example{{"y": fl(1)}, {"y": in(2)}},
			map[string]dense{"y": {[]int{2, 1}, []int64{1, 2}}}},
		{"label vocabulary", Config{Columns: []Column{x}, Label: &Label{Key: "y", Vocabulary: []string{"<=50K", ">50K"}}},
			[]dataset.Example{{"y": by(">50K")}, {"y": by("<=50K")}},
			map[string]dense{"y": {[]int{2, 1}, []int64{1, 0}}}},
		{"no labels: serving", Config{Columns: []Column{x}, Label: &Label{Key: "y"}, Weight: &ExampleWeight{Key: "w"}},
			[]dataset.Example{{"x": fl(1)}, {}}, nil},
		{"example weights", Config{Columns: []Column{x}, Label: &Label{Key: "y"}, Weight: &ExampleWeight{Key: "w", Default: &one}},
			[]dataset.Example{{"y": fl(1), "w": fl(3)}, {"y": fl(0)}},
			map[string]dense{"y": {[]int{2, 1}, []float32{1, 0}}, "w": {[]int{2, 1}, []float32{3, 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := mustTransformer(t, tc.cfg).Parse(tc.exs)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]dense
			for k, v := range b.Labels {
				if got == nil {
					got = map[string]dense{}
				}
				got[k] = plainDense(v)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		exs     []dataset.Example
		record  int
		feature string
		says    []string
	}{
		{"label missing from some records", Config{Columns: []Column{x}, Label: &Label{Key: "y"}},
			[]dataset.Example{{"y": fl(1)}, {"y": fl(1)}, {}}, 2, "y", []string{"no label"}},
		{"label outside the vocabulary", Config{Columns: []Column{x}, Label: &Label{Key: "y", Vocabulary: []string{"no", "yes"}}},
			[]dataset.Example{{"y": by("maybe")}}, 0, "y", []string{`"maybe"`, "vocabulary"}},
		{"string label without a vocabulary", Config{Columns: []Column{x}, Label: &Label{Key: "y"}},
			[]dataset.Example{{"y": by("yes")}}, 0, "y", []string{`"yes"`, "no vocabulary"}},
		{"weight missing, no default", Config{Columns: []Column{x}, Label: &Label{Key: "y"}, Weight: &ExampleWeight{Key: "w"}},
			[]dataset.Example{{"y": fl(1), "w": fl(1)}, {"y": fl(1)}}, 1, "w", []string{"no example weight"}},
		{"class id not an integer", Config{Columns: []Column{x}, Label: &Label{Key: "y", Int64: true}},
			[]dataset.Example{{"y": fl(1.5)}}, 0, "y", []string{"1.5", "not an integer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mustTransformer(t, tc.cfg).Parse(tc.exs)
			wantRecordError(t, err, tc.record, tc.feature, tc.says...)
		})
	}
}

func TestNewTransformerErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		says string
	}{
		{"no columns", Config{}, "at least one column"},
		{"unfitted", Config{Columns: []Column{Numeric("x", Standardize())}}, `"x" needs statistics`},
		{"unfitted vocabulary", Config{Columns: []Column{Indicator(VocabularyFromData("c"))}}, `"c_indicator" needs statistics`},
		{"two columns of one name", Config{Columns: []Column{Numeric("x"), VocabularyList("x", []string{"a"})}}, `feature "x"`},
		{"bad boundaries", Config{Columns: []Column{Bucketized(Numeric("x"), []float64{1, 1})}}, "strictly increasing"},
		{"vocabulary repeats", Config{Columns: []Column{VocabularyList("c", []string{"a", "b", "a"})}}, `entry "a" at 0 and 2`},
		{"default and OOV", Config{Columns: []Column{VocabularyList("c", []string{"a"}, DefaultID(0), OOVBuckets(2))}}, "both a default id and OOV buckets"},
		{"weight without label", Config{Columns: []Column{Numeric("x")}, Weight: &ExampleWeight{Key: "w"}}, "without a label"},
		{"shared embedding sizes", Config{Columns: []Column{SharedEmbeddings([]CategoricalColumn{Identity("a", 3), Identity("b", 4)}, 2)[0]}}, "differ in size"},
		{"nil column", Config{Columns: []Column{(*NumericColumn)(nil)}}, "column 0 is nil"},
		{"too many values a record", Config{Columns: []Column{Numeric("x", Shape(1<<13, 1<<13))}}, "more than 16777216 values"},
		{"vocabulary file missing", Config{Columns: []Column{VocabularyFile("c", "/nonexistent/vocab.txt", 0)}}, `vocabulary column "c": vocabulary file: open /nonexistent/vocab.txt`},
		{"embedding dimension", Config{Columns: []Column{Embedding(Identity("i", 3), 0)}}, "dimension 0"},
		{"crossed one key", Config{Columns: []Column{Crossed([]Crossable{RawKey("a")}, 3)}}, "1 keys, want at least 2"},
		{"crossed without crosses", Config{Columns: []Column{Crossed([]Crossable{RawKey("a"), RawKey("b")}, 3, MaxCrosses(0))}}, `crossed column "a_X_b": MaxCrosses 0, want at least 1`},
		{"weights of the values' feature", Config{Columns: []Column{Weighted(HashBucket("x", 3), "x")}}, `weighted column "x_weighted_by_x": the weights' feature "x" is the values'`},
		{"weighted nil column", Config{Columns: []Column{Weighted((*VocabularyColumn)(nil), "w")}}, "weighted column of a nil categorical column"},
		{"indicator of a nil column", Config{Columns: []Column{Indicator((*IdentityColumn)(nil))}}, "indicator column of a nil categorical column"},
		{"embedding of a nil column", Config{Columns: []Column{Embedding((*HashBucketColumn)(nil), 2)}}, "embedding column of a nil categorical column"},
		{"shared embedding of a nil column", Config{Columns: []Column{SharedEmbeddings([]CategoricalColumn{Identity("a", 3), (*IdentityColumn)(nil)}, 2)[0]}}, `shared embedding "a_<nil>_shared_embedding": a nil categorical column`},
		{"crossed nil column", Config{Columns: []Column{Crossed([]Crossable{RawKey("a"), (*VocabularyColumn)(nil)}, 3)}}, `crossed column "a_X_<nil>": key 1 is a nil *columns.VocabularyColumn`},
		{"crossed nil cross", Config{Columns: []Column{Crossed([]Crossable{RawKey("a"), RawKey("b"), (*CrossedColumn)(nil)}, 3)}}, "key 2 is a nil *columns.CrossedColumn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTransformer(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
	// One column used twice, or two equal definitions, is fine.
	c := VocabularyList("c", []string{"a"})
	if _, err := NewTransformer(Config{Columns: []Column{c, Indicator(c), Embedding(c, 2), VocabularyList("c", []string{"a"})}}); err != nil {
		t.Errorf("one column used thrice: %v", err)
	}
}

// TestParseConcurrent parses from several goroutines at once: under
// -race, Parse must share nothing it writes.
func TestParseConcurrent(t *testing.T) {
	city := VocabularyList("city", []string{"a", "b"}, OOVBuckets(2))
	tr := mustTransformer(t, Config{Columns: []Column{
		Numeric("x", Normalize(Normalizer{Mean: 1, Stddev: 2})), Bucketized(Numeric("x"), []float64{0}),
		city, Indicator(city), Crossed([]Crossable{city, RawKey("z")}, 50), Weighted(Identity("i", 4), "w"),
	}, Label: &Label{Key: "y"}})
	exs := []dataset.Example{
		{"x": fl(3), "city": by("a", "q"), "z": in(1), "i": in(2), "w": fl(0.5), "y": fl(1)},
		{"x": fl(-1), "city": by("b"), "z": by("s"), "y": fl(0)},
	}
	want, err := tr.Parse(exs)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	got := make([]sharding.Batch, 8)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[g], errs[g] = tr.Parse(exs)
		}()
	}
	wg.Wait()
	for g := range errs {
		if errs[g] != nil {
			t.Fatalf("goroutine %d: %v", g, errs[g])
		}
		for k, v := range want.Sparse {
			if diff := cmp.Diff(plain(v), plain(got[g].Sparse[k])); diff != "" {
				t.Errorf("goroutine %d: %s (-want +got):\n%s", g, k, diff)
			}
		}
		for k, v := range want.Features {
			if diff := cmp.Diff(plainDense(v), plainDense(got[g].Features[k])); diff != "" {
				t.Errorf("goroutine %d: %s (-want +got):\n%s", g, k, diff)
			}
		}
	}
}

// crossOf is the cross of strings into 100 buckets with the default key.
func crossOf(vals ...string) int64 {
	var h []uint64
	for _, v := range vals {
		h = append(h, Fingerprint64([]byte(v)))
	}
	return crossHash(DefaultHashKey, h, 100)
}

func TestVocabularyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vocab.txt")
	if err := os.WriteFile(path, []byte("north\nsouth\r\neast\nwest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		size int
		want []string
		says string
	}{
		{"every line", 0, []string{"north", "south", "east", "west"}, ""},
		{"the first 3 lines", 3, []string{"north", "south", "east"}, ""},
		{"more than the file has", 5, nil, "has 4 lines, vocabulary size 5 asked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := VocabularyFile("region", path, tc.size)
			_, err := NewTransformer(Config{Columns: []Column{c}})
			if tc.says != "" {
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("error %v, want one saying %q", err, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.Vocabulary()); diff != "" {
				t.Errorf("vocabulary (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEmbeddingDefaults checks TensorFlow's defaults of an embedding
// column: the mean combiner, an initializer of stddev 1/√dimension.
func TestEmbeddingDefaults(t *testing.T) {
	e := Embedding(Identity("i", 3), 16)
	if e.Combiner() != layers.CombineMean || e.stddev != 0.25 {
		t.Errorf("combiner %v, initializer stddev %v; want mean, 0.25", e.Combiner(), e.stddev)
	}
}

// TestTransformerKeepsItsConfig: changing the Label given to
// NewTransformer, or the one Config returns, changes neither what Parse
// does nor what MarshalJSON writes.
func TestTransformerKeepsItsConfig(t *testing.T) {
	label := &Label{Key: "y", Vocabulary: []string{"no", "yes"}}
	tr := mustTransformer(t, Config{Columns: []Column{Numeric("x", Default(0))}, Label: label})
	before, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	label.Vocabulary[0], label.Key = "maybe", "z"
	tr.Config().Label.Vocabulary[1] = "perhaps"
	after, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("JSON changed (-before +after):\n%s", diff)
	}
	b, err := tr.Parse([]dataset.Example{{"y": by("yes")}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{1}, b.Labels["y"].Data()); diff != "" {
		t.Errorf("label (-want +got):\n%s", diff)
	}
}

// TestTransformerColumn: Column finds a column given to the Transformer,
// or one whose batch feature they make (an embedding's categorical
// column, a bucketized column's indicator), fitted, and nothing else.
func TestTransformerColumn(t *testing.T) {
	city := VocabularyFromData("city")
	age := Numeric("age")
	ageBuckets := BucketizedQuantiles(age, 2)
	job := HashBucket("job", 10)
	cfg := Config{Columns: []Column{Embedding(city, 2), ageBuckets, Indicator(job)}}
	tr := mustFit(t, cfg,
		dataset.Example{"city": by("Oslo"), "age": fl(20), "job": by("chef")},
		dataset.Example{"city": by("Lima"), "age": fl(40), "job": by("chef")},
		dataset.Example{"city": by("Oslo"), "age": fl(60), "job": by("chef")},
	)
	tests := []struct {
		name  string
		found bool
		vocab []string // of a vocabulary column found
	}{
		{"city_embedding", true, nil},
		{"city", true, []string{"Oslo", "Lima"}},
		{"age_bucketized", true, nil},
		{"age_bucketized_indicator", true, nil},
		{"job_indicator", true, nil},
		{"age", false, nil}, // read through its buckets only: the batch has no "age"
		{"job", false, nil}, // read through its indicator only
		{"nothing", false, nil},
	}
	for _, tc := range tests {
		c, ok := tr.Column(tc.name)
		if ok != tc.found {
			t.Errorf("Column(%q) found %v, want %v", tc.name, ok, tc.found)
			continue
		}
		if !ok {
			continue
		}
		if c.Name() != tc.name {
			t.Errorf("Column(%q) is %q", tc.name, c.Name())
		}
		if !c.fitted() {
			t.Errorf("Column(%q) is not fitted", tc.name)
		}
		if v, isVocab := c.(*VocabularyColumn); isVocab {
			if diff := cmp.Diff(tc.vocab, v.Vocabulary()); diff != "" {
				t.Errorf("Column(%q) vocabulary (-want +got):\n%s", tc.name, diff)
			}
		}
	}
}

// A column parsed with others that share its sources (an indicator, a
// sparse feature and crosses reading one vocabulary; crosses with a raw
// key and a column at the same place) gives what it gives alone.
func TestParseTogetherAsAlone(t *testing.T) {
	city := VocabularyList("city", []string{"a", "b", "c"}, OOVBuckets(2))
	occ := HashBucket("occ", 50)
	age := Numeric("age", Default(30))
	ageB := Bucketized(age, []float64{18, 30, 50})
	id := Identity("id", 10, IdentityDefault(0))
	cols := []Column{
		Crossed([]Crossable{RawKey("city"), RawKey("occ"), RawKey("id")}, 100),
		Crossed([]Crossable{city, RawKey("occ"), ageB}, 100),
		Crossed([]Crossable{RawKey("city"), RawKey("occ")}, 100),
		Crossed([]Crossable{ageB, RawKey("city")}, 100),
		Crossed([]Crossable{id, RawKey("occ")}, 100),
		city, occ, age, ageB, id,
		Weighted(city, "w"), Indicator(city), Indicator(occ), Embedding(occ, 4), Indicator(id),
	}
	examples := []dataset.Example{
		{"city": by("a", "zz"), "occ": by("x"), "age": fl(17), "id": in(3), "w": fl(1, 2)},
		{"city": by("c"), "occ": by("y", "z"), "age": fl(51), "id": in(12), "w": fl(0.5)},
		{"city": by(""), "occ": by(""), "id": in(), "w": fl(3)},
		{},
		{"city": by("b", "b", "q"), "occ": in(7), "age": in(30), "id": in(9), "w": fl(1, 1, 1)},
	}
	together, err := mustTransformer(t, Config{Columns: cols}).Parse(examples)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cols {
		alone, err := mustTransformer(t, Config{Columns: []Column{c}}).Parse(examples)
		if err != nil {
			t.Fatal(err)
		}
		diffBatchIn(t, alone, together, "-alone +together")
	}
}

// A cross reads every key: a bad value in one is an error even when
// another key of the record is empty (which alone makes no crosses).
func TestParseCrossReadsEveryKey(t *testing.T) {
	tr := mustTransformer(t, Config{Columns: []Column{Crossed([]Crossable{RawKey("a"), Identity("b", 5)}, 10)}})
	b, err := tr.Parse([]dataset.Example{{"b": in(3)}, {"a": by("x"), "b": in(2)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := plain(b.Sparse["a_X_b"]); len(got.Indices) != 1 || got.Indices[0][0] != 1 {
		t.Errorf("crosses %v, want one, of record 1", got)
	}
	for _, ex := range []dataset.Example{{"b": in(9)}, {"a": by("x"), "b": in(9)}} {
		_, err = tr.Parse([]dataset.Example{ex})
		wantRecordError(t, err, 0, "b", "outside")
	}
}

// PrepareRow's rows are the Transformer's own, whatever another
// Transformer (with weights, with labels) prepared before.
func TestPrepareRowAfterAnother(t *testing.T) {
	city := VocabularyList("city", []string{"a", "b"})
	weighted := mustTransformer(t, Config{Columns: []Column{Weighted(city, "w")}, Label: &Label{Key: "y"}})
	plainCols := mustTransformer(t, Config{Columns: []Column{city, Indicator(city)}})
	exs := []dataset.Example{{"city": by("a", "b"), "w": fl(1, 2), "y": fl(1)}, {"city": by("b"), "w": fl(3), "y": fl(0)}}
	for range 4 {
		for _, tr := range []*Transformer{weighted, plainCols} {
			want, werr := tr.Parse(exs)
			rows := make([]any, len(exs))
			var err error
			for i, ex := range exs {
				if rows[i], err = tr.PrepareRow(ex); err != nil {
					t.Fatal(err)
				}
			}
			got, gerr := tr.ParseRows(rows)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("Parse error %v, rows error %v", werr, gerr)
			}
			diffBatchIn(t, want, got, "-Parse +rows")
		}
	}
}
