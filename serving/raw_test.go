package serving

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/embedtest"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

func init() { export.RegisterPreprocessor(embedtest.VocabKind, embedtest.LoadWords) }

// wordsPipeline reads the CSV file through embedtest.TheWords: for
// training, shuffled forever with labels; else once, in order, without.
func wordsPipeline(t *testing.T, path string, training bool) estimator.InputFn {
	t.Helper()
	p := dataset.Pipeline{Files: []string{path}, CSV: &dataset.CSVOptions{Schema: embedtest.WordsSchema, Columns: []string{"word", "num"}},
		Parser: embedtest.TheWords, BatchSize: 3, Workers: 2}
	if training {
		p.CSV.Columns, p.Epochs, p.ShuffleBuffer, p.Seed = nil, estimator.Forever, 4, 1
	}
	in, err := p.Input()
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// rawRow is a row of embedtest.WordsCSV.
type rawRow struct {
	word, num string // num "": empty
}

func rawRows(t *testing.T) []rawRow {
	t.Helper()
	var rows []rawRow
	for _, line := range strings.Split(strings.TrimSpace(embedtest.WordsCSV), "\n")[1:] {
		f := strings.Split(line, ",")
		rows = append(rows, rawRow{f[0], f[1]})
	}
	return rows
}

// rawBodies writes rows as requests of raw values: predict's instances
// and inputs, and classify's and regress's examples. The ways of writing
// a value vary by row: a word alone, in a list, as base64; a number as
// written, a missing number left out (in columns, 0, its default).
func rawBodies(rows []rawRow) (instances, columnar, examples string) {
	var objs, words, nums []string
	for i, r := range rows {
		word := fmt.Sprintf("%q", r.word)
		switch i % 3 {
		case 1:
			word = "[" + word + "]"
		case 2:
			word = `{"b64": "` + base64.StdEncoding.EncodeToString([]byte(r.word)) + `"}`
		}
		obj := `{"word": ` + word
		num := r.num
		if num != "" {
			obj += `, "num": ` + num
		} else {
			num = "0"
		}
		objs = append(objs, obj+"}")
		words, nums = append(words, word), append(nums, num)
	}
	list := "[" + strings.Join(objs, ", ") + "]"
	return `{"instances": ` + list + `}`,
		`{"inputs": {"word": [` + strings.Join(words, ", ") + `], "num": [` + strings.Join(nums, ", ") + `]}}`,
		list
}

// TestServeRawValues trains embedtest.Model through a preprocessor on
// CSV rows (Pipeline with a Parser), exports it with Preprocess, and
// serves it: predict (rows and columns), regress and classify take the
// raw values of the same rows (strings, base64 bytes, numbers, missing
// numbers) and answer exactly as Estimator.Predict on the rows read
// through the pipeline, with request batching too; the metadata
// describes the raw features; bad raw values are 400s naming the
// example and the feature.
func TestServeRawValues(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "words.csv")
	if err := os.WriteFile(path, []byte(embedtest.WordsCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	mdl := replicate.ModelFn(embedtest.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0), towers.CPU(1)}, Optimizer: optimizers.SGD(0.1)})
	est, err := estimator.New(mdl, estimator.RunConfig{Seed: 1, LogEvery: -1, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	if err := est.Train(ctx, wordsPipeline(t, path, true), estimator.Steps(4)); err != nil {
		t.Fatal(err)
	}
	var want []float64
	for p, err := range est.Predict(ctx, wordsPipeline(t, path, false)) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, p["p"].Data().([]float64)...)
	}
	base := t.TempDir()
	if _, err := est.Export(ctx, base, embedtest.Serving, estimator.Preprocess(embedtest.TheWords)); err != nil {
		t.Fatal(err)
	}
	rows := rawRows(t)
	instances, columnar, examples := rawBodies(rows)
	t.Run("formats", func(t *testing.T) {
		_, hs := newTestServer(t, []ModelConfig{{Name: "words", BaseDir: base, Model: mdl}}, Config{})
		checkServedAsPredict(t, hs, "words", instances, columnar, examples, want)
		var reg struct{ Results []float64 }
		// A context gives every example its features.
		postOK(t, hs, "words", "regress", `{"signature_name": "regress", "context": {"num": 2}, "examples": [{"word": "mauve"}]}`, &reg)
		if diff := cmp.Diff(want[3:4], reg.Results); diff != "" {
			t.Errorf("regress with a context (-Estimator.Predict +served):\n%s", diff)
		}
	})

	// A request of one row waits in a batch of rows+1 until the others
	// fill it; each gets its own rows' answer.
	t.Run("batching", func(t *testing.T) {
		s, hs := newTestServer(t, []ModelConfig{{Name: "words", BaseDir: base, Model: mdl}}, Config{BatchTimeout: time.Hour, MaxBatchSize: len(rows) + 1})
		joined := make(chan int, 10)
		s.batcher.enqueued = func(_ batchKey, rows int) { joined <- rows }
		first := predictAsync(hs, "/v1/models/words:predict", `{"instances": [{"word": ["blue", "red", "nope"], "num": 1}]}`)
		if n := await(t, "the first request's batch", joined); n != 1 {
			t.Fatalf("the first request made a batch of %d rows", n)
		}
		second := predictAsync(hs, "/v1/models/words:predict", instances)
		if n := await(t, "the second request's batch", joined); n != len(rows)+1 {
			t.Fatalf("the second request made a batch of %d rows, want both in one", n)
		}
		one := <-first
		wantPredictions(t, "the request of many rows", want, <-second)
		if one.err != nil {
			t.Fatal(one.err)
		}
		alone, err := export.Load(filepath.Join(base, "1"), mdl)
		if err != nil {
			t.Fatal(err)
		}
		defer alone.Close()
		out, err := alone.PredictExamples(ctx, "serving_default", []dataset.Example{{"word": {Bytes: [][]byte{[]byte("blue"), []byte("red"), []byte("nope")}}, "num": {Floats: []float32{1}}}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(out["p"].Data().([]float64), one.ys); diff != "" {
			t.Errorf("the request of one row (-PredictExamples +served):\n%s", diff)
		}
	})

	_, hs := newTestServer(t, []ModelConfig{{Name: "words", BaseDir: base, Model: mdl}}, Config{})
	res := do(t, hs, "GET", "/v1/models/words/metadata", "")
	var md tfModelMetadata
	if err := json.Unmarshal([]byte(res.body), &md); err != nil || res.code != http.StatusOK {
		t.Fatalf("metadata: status %d, %v: %s", res.code, err, res.body)
	}
	wantInputs := map[string]tfTensorInfo{
		"word": {Dtype: "DT_STRING", TensorShape: tfTensorShape{Dim: []tfDim{{Size: "-1"}, {Size: "-1"}}}, CooSparse: &tfCooSparse{"word/values", "word/indices", "word/dense_shape"}},
		"num":  {Dtype: "DT_FLOAT", TensorShape: tfTensorShape{Dim: []tfDim{{Size: "-1"}, {Size: "1"}}}, Name: "num"},
	}
	for _, key := range []string{"serving_default", "regress", "classify"} {
		if diff := cmp.Diff(wantInputs, md.Metadata.SignatureDef.SignatureDef[key].Inputs); diff != "" {
			t.Errorf("metadata of %s: inputs (-want +got):\n%s", key, diff)
		}
	}

	const predict = "/v1/models/words:predict"
	checkErrors(t, hs, []errorCase{
		{"a label in some examples", "POST", predict, `{"instances": [{"word": "red"}, {"word": "red", "label": 1.5}]}`, 400, `example 0: feature "label": missing`},
		{"two numbers", "POST", "/v1/models/words:regress", `{"signature_name": "regress", "examples": [{"word": "red"}, {"word": "red", "num": [1, 2]}]}`, 400, `example 1: feature "num": holds 2 float values`},
		{"too many words", "POST", predict, `{"instances": [{"word": "red"}, {"word": ["a", "b", "c", "d", "e"]}]}`, 400, `example 1: input "cat" has 5 values, the signature takes at most 4`},
		{"a string number", "POST", predict, `{"instances": [{"word": "red"}, {"word": "red", "num": "x"}]}`, 400, `instance 1: feature "num": value 0 (a float feature): JSON Value: "x" Type: String is not of expected type: float64`},
		{"a boolean word", "POST", "/v1/models/words:classify", `{"signature_name": "classify", "examples": [{"word": true}]}`, 400, `example 0: feature "word": value 0: true is not a string`},
		{"null", "POST", predict, `{"instances": [{"word": null}]}`, 400, `instance 0: feature "word": value 0 is null`},
		{"nested", "POST", predict, `{"instances": [{"word": [["red"]]}]}`, 400, `instance 0: feature "word": value 0 is a list`},
		{"bad base64", "POST", predict, `{"instances": [{"word": {"b64": "%%"}}]}`, 400, `instance 0: feature "word": value 0: "b64" is not base64`},
		{"another object", "POST", predict, `{"instances": [{"word": {"text": "red"}}]}`, 400, `the only object a value may be is {"b64": base64 bytes}`},
		{"a plain instance", "POST", predict, `{"instances": ["red"]}`, 400, `instance 0: want an object of raw feature values by name`},
		{"uneven columns", "POST", predict, `{"inputs": {"word": ["red", "blue"], "num": [1]}}`, 400, `'inputs': feature "word" has 2 examples, feature "num" has 1`},
		{"columns not a list", "POST", predict, `{"inputs": {"word": "red"}}`, 400, `'inputs': feature "word": want a list with one entry per example`},
		{"a context feature in an example", "POST", "/v1/models/words:regress", `{"signature_name": "regress", "context": {"num": 1}, "examples": [{"word": "red", "num": 2}]}`, 400, `example 0: feature "num" is in the context too`},
		{"classify on regress", "POST", "/v1/models/words:classify", `{"signature_name": "regress", "examples": [{"word": "red"}]}`, 400, `Expected classify signature method_name`},
	})
}

// TestRawFeature: raw JSON values become Features of the kind the
// preprocessor describes, or, for a feature it does not describe, of the
// kind the values say, as tf.Example JSON.
func TestRawFeature(t *testing.T) {
	r := &rawInputs{spec: map[string]dataset.FeatureSpec{
		"s": {Dtype: tensor.String, VarLen: true},
		"f": {Dtype: tensor.Float64},
		"i": {Dtype: tensor.Int64},
	}}
	bytes := func(ss ...string) dataset.Feature {
		f := dataset.Feature{Bytes: [][]byte{}}
		for _, s := range ss {
			f.Bytes = append(f.Bytes, []byte(s))
		}
		return f
	}
	tests := []struct {
		name, feature, value string
		want                 dataset.Feature
		err                  string
	}{
		{"a string", "s", `"a"`, bytes("a"), ""},
		{"strings, base64 and a number's text", "s", `["a", {"b64": "/w=="}, 1.50]`, bytes("a", "\xff", "1.50"), ""},
		{"no values", "s", `[]`, bytes(), ""},
		{"an integer as a float", "f", `3`, dataset.Feature{Floats: []float32{3}}, ""},
		{"floats", "f", `[0.5, -1e3, NaN]`, dataset.Feature{Floats: []float32{0.5, -1000, float32NaN()}}, ""},
		{"a float beyond float32", "f", `1e39`, dataset.Feature{}, "beyond float32's range"},
		{"a boolean as a float", "f", `true`, dataset.Feature{}, "true is not a number"},
		{"int64s and booleans", "i", `[7, -9007199254740993, true]`, dataset.Feature{Int64s: []int64{7, -9007199254740993, 1}}, ""},
		{"a fraction as an int64", "i", `1.5`, dataset.Feature{}, "value 0 (an int64 feature)"},
		{"undescribed integers", "u", `[1, 2, false]`, dataset.Feature{Int64s: []int64{1, 2, 0}}, ""},
		{"undescribed numbers", "u", `[1, 2.5]`, dataset.Feature{Floats: []float32{1, 2.5}}, ""},
		{"undescribed strings", "u", `["x", {"b64": "eQ=="}]`, bytes("x", "y"), ""},
		{"undescribed, mixed", "u", `["x", 1]`, dataset.Feature{}, "1 is a number among strings"},
		{"undescribed, none", "u", `[]`, dataset.Feature{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := parseJSON([]byte(tc.value), 100, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.feature(tc.feature, v)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float32) bool { return a == b || (a != a && b != b) })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func float32NaN() float32 {
	var zero float32
	return zero / zero
}

// undescribed is wordsServable without a description of its raw
// features.
type undescribed struct{ wordsServable }

func (*undescribed) RawSpec() map[string]dataset.FeatureSpec { return nil }

// TestServeUndescribedRawValues: a preprocessor that does not describe
// its raw features gets values of the kinds they say, as tf.Example JSON
// (an integer is an int64 list, which Words refuses for "num"; 2.0 is a
// float), and the metadata lists no inputs.
func TestServeUndescribedRawValues(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(&undescribed{})}}, Config{})
	res := do(t, hs, "POST", "/v1/models/m:predict", `{"instances": [{"word": "red", "num": 2.0}, {"word": ["blue", "teal"], "num": 0.5}]}`)
	if res.code != http.StatusOK {
		t.Fatalf("status %d: %s", res.code, res.body)
	}
	// p = x + the ids: red 0, blue 2 and teal (unknown) 5.
	if diff := cmp.Diff([]float64{2, 7.5}, predictions(t, res)); diff != "" {
		t.Errorf("predictions (-want +got):\n%s", diff)
	}
	checkErrors(t, hs, []errorCase{
		{"an integer for a float", "POST", "/v1/models/m:predict", `{"instances": [{"word": "red", "num": 2}]}`, 400, `example 0: feature "num": holds 1 int64 values, want one float`},
	})
	res = do(t, hs, "GET", "/v1/models/m/metadata", "")
	var md tfModelMetadata
	if err := json.Unmarshal([]byte(res.body), &md); err != nil {
		t.Fatal(err)
	}
	for key, sig := range md.Metadata.SignatureDef.SignatureDef {
		if len(sig.Inputs) != 0 {
			t.Errorf("metadata of %s: inputs %v, want none (the raw features are not described)", key, sig.Inputs)
		}
	}
}
