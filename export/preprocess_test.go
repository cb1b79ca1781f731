package export_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/embedtest"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

func init() { export.RegisterPreprocessor(embedtest.VocabKind, embedtest.LoadWords) }

// wordsCSV writes embedtest.WordsCSV into a temporary directory.
func wordsCSV(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "words.csv")
	must(t, os.WriteFile(path, []byte(embedtest.WordsCSV), 0o644))
	return path
}

// wordsInput is a pipeline of the CSV file through embedtest.TheWords:
// for training, shuffled forever with labels; else once, in order,
// without them.
func wordsInput(t *testing.T, path string, training bool) estimator.InputFn {
	t.Helper()
	p := dataset.Pipeline{Files: []string{path}, CSV: &dataset.CSVOptions{Schema: embedtest.WordsSchema, Columns: []string{"word", "num"}},
		Parser: embedtest.TheWords, BatchSize: 3, Workers: 2}
	if training {
		p.CSV.Columns, p.Epochs, p.ShuffleBuffer, p.Seed = nil, estimator.Forever, 4, 1
	}
	in, err := p.Input()
	must(t, err)
	return in
}

// exportWords trains embedtest.Model through embedtest.TheWords on n
// towers and exports it with the preprocessor.
func exportWords(t *testing.T, n int, path string) (*estimator.Estimator, *replicate.Model, string) {
	t.Helper()
	mdl := replicate.ModelFn(embedtest.Model, replicate.Config{Devices: towers.CPUs(n), Optimizer: optimizers.SGD(0.1), Reduction: replicate.BatchMean})
	est, err := estimator.New(mdl, estimator.RunConfig{ModelDir: t.TempDir(), Seed: 1, LogEvery: -1, Logger: quiet})
	must(t, err)
	t.Cleanup(func() { est.Close() })
	must(t, est.Train(context.Background(), wordsInput(t, path, true), estimator.Steps(4)))
	dir, err := est.Export(context.Background(), t.TempDir(), embedtest.Serving, estimator.Preprocess(embedtest.TheWords))
	must(t, err)
	return est, mdl, dir
}

// csvExamples reads the raw records of the CSV file without labels.
func csvExamples(t *testing.T, path string) []dataset.Example {
	t.Helper()
	r, err := dataset.NewCSVReader([]string{path}, dataset.CSVOptions{Schema: embedtest.WordsSchema, Columns: []string{"word", "num"}})
	must(t, err)
	defer r.Close()
	var out []dataset.Example
	for {
		ex, err := r.Next()
		if err != nil {
			break
		}
		out = append(out, ex)
	}
	return out
}

// TestPreprocessedExport trains through a Parser, exports it with
// Preprocess and loads it: the export holds the preprocessor in its
// manifest, and PredictExamples on the raw records answers exactly as
// Estimator.Predict on the same rows read through the pipeline.
func TestPreprocessedExport(t *testing.T) {
	path := wordsCSV(t)
	est, mdl, dir := exportWords(t, 2, path)
	var want []float64
	for p, err := range est.Predict(context.Background(), wordsInput(t, path, false)) {
		must(t, err)
		want = append(want, p["p"].Data().([]float64)...)
	}
	data, err := os.ReadFile(filepath.Join(dir, exportdir.ManifestFile))
	must(t, err)
	if !strings.Contains(string(data), `"`+exportdir.PreprocessorFile+`"`) {
		t.Errorf("the manifest does not list %s:\n%s", exportdir.PreprocessorFile, data)
	}
	for _, n := range []int{1, 3} {
		p := load(t, dir, replicate.ModelFn(embedtest.Model, replicate.Config{Devices: towers.CPUs(n)}))
		if kind, ok := p.Preprocessor(); kind != embedtest.VocabKind || !ok {
			t.Errorf("Preprocessor() = %q, %v; want %q, true", kind, ok, embedtest.VocabKind)
		}
		if diff := cmp.Diff(embedtest.TheWords.RawSpec(), p.RawSpec(), cmp.Comparer(func(a, b tensor.Dtype) bool { return a == b })); diff != "" {
			t.Errorf("RawSpec (-want +got):\n%s", diff)
		}
		examples := csvExamples(t, path)
		for _, sig := range []string{"serving_default", "regress"} {
			out, err := p.PredictExamples(context.Background(), sig, examples)
			must(t, err)
			name := map[string]string{"serving_default": "p", "regress": "outputs"}[sig]
			if diff := cmp.Diff(want, out[name].Data().([]float64)); diff != "" {
				t.Errorf("%d towers, %s: PredictExamples (-Predict +got):\n%s", n, sig, diff)
			}
		}
	}
	// Without the preprocessor: an export of the same model has none.
	plainDir, err := est.Export(context.Background(), t.TempDir(), embedtest.Serving)
	must(t, err)
	p := load(t, plainDir, mdl)
	if _, ok := p.Preprocessor(); ok {
		t.Error("an export without Preprocess has a preprocessor")
	}
	_, err = p.PredictExamples(context.Background(), "serving_default", csvExamples(t, path))
	wanterr.Mentions(t, err, "no preprocessor")
}

// TestPreprocessErrors: errors of the raw examples wrap ErrBadInput and
// name the example and the feature.
func TestPreprocessErrors(t *testing.T) {
	_, _, dir := exportWords(t, 1, wordsCSV(t))
	p := load(t, dir, replicate.ModelFn(embedtest.Model, replicate.Config{Devices: towers.CPUs(1)}))
	words := func(ws ...string) dataset.Feature {
		f := dataset.Feature{Bytes: [][]byte{}}
		for _, w := range ws {
			f.Bytes = append(f.Bytes, []byte(w))
		}
		return f
	}
	ok := dataset.Example{"word": words("red"), "num": {Floats: []float32{1}}}
	tests := []struct {
		name     string
		sig      string
		examples []dataset.Example
		bad      bool
		want     []string
	}{
		{"a feature of the wrong kind", "serving_default", []dataset.Example{ok, {"word": {Floats: []float32{1}}}}, true,
			[]string{"example 1", `feature "word"`, "float"}},
		{"too many values", "regress", []dataset.Example{ok, ok, {"word": words("a", "b", "c", "d", "e")}}, true,
			[]string{"example 2", `input "cat" has 5 values`, "at most 4"}},
		{"a label missing from some", "serving_default", []dataset.Example{ok, {"word": words("red"), "label": {Floats: []float32{1}}}}, true,
			[]string{"example 0", `feature "label"`}},
		{"no examples", "serving_default", nil, true, []string{"no examples"}},
		{"unknown signature", "nope", []dataset.Example{ok}, false, []string{`unknown signature "nope"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.PredictExamples(context.Background(), tc.sig, tc.examples)
			wanterr.Mentions(t, err, tc.want...)
			if got := errors.Is(err, export.ErrBadInput); got != tc.bad {
				t.Errorf("errors.Is(err, ErrBadInput) = %v, want %v", got, tc.bad)
			}
		})
	}
}

// badPreprocessor is a Preprocessor with a kind and JSON of its own.
type badPreprocessor struct {
	kind string
	json string
	err  error
}

func (b badPreprocessor) PreprocessKind() string       { return b.kind }
func (b badPreprocessor) MarshalJSON() ([]byte, error) { return []byte(b.json), b.err }

// TestPreprocessorLoadErrors: an export whose preprocessor cannot be
// rebuilt does not load, with an error naming the kind and the package
// to import, or the file; a preprocessor Export cannot record writes no
// version.
func TestPreprocessorLoadErrors(t *testing.T) {
	_, mdl, dir := exportWords(t, 1, wordsCSV(t))
	tests := []struct {
		name    string
		content string // the preprocessor's file
		want    []string
	}{
		{"unknown kind", `{"kind": "acme/magic", "config": {}}`, []string{exportdir.PreprocessorFile, `kind "acme/magic" is not registered`, "must be imported", embedtest.VocabKind}},
		{"towerflow's kind not imported", `{"kind": "towerflow/columns", "config": {}}`, []string{`kind "towerflow/columns" is not registered`, `import _ "github.com/towerflow/towerflow/columns"`}},
		{"malformed", `{"kind": "towerflow/col`, []string{exportdir.PreprocessorFile, "unexpected end of JSON"}},
		{"no kind", `{"config": {}}`, []string{exportdir.PreprocessorFile, `"kind"`}},
		{"the loader refuses", `{"kind": "` + embedtest.VocabKind + `", "config": {"vocab": ["a","b","c","d","e","f","g","h","i","j"]}}`,
			[]string{exportdir.PreprocessorFile, embedtest.VocabKind, "10 words"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := copyVersion(t, dir, "1")
			must(t, os.WriteFile(filepath.Join(v, exportdir.PreprocessorFile), []byte(tc.content), 0o644))
			relist(t, v, exportdir.PreprocessorFile)
			_, err := export.Load(v, mdl)
			wanterr.Mentions(t, err, tc.want...)
		})
	}
	t.Run("not in the manifest", func(t *testing.T) {
		v := copyVersion(t, dir, "1")
		must(t, os.Remove(filepath.Join(v, exportdir.PreprocessorFile)))
		_, err := export.Load(v, mdl)
		wanterr.Mentions(t, err, exportdir.PreprocessorFile, "missing")
	})

	est, _, _ := exportWords(t, 1, wordsCSV(t))
	for _, bad := range []badPreprocessor{{kind: "", json: "{}"}, {kind: "a kind", json: "{}"}, {kind: "k", json: "{"}, {kind: "k", err: errors.New("cannot marshal")}} {
		base := t.TempDir()
		_, err := est.Export(context.Background(), base, embedtest.Serving, estimator.Preprocess(bad))
		if err == nil || !strings.Contains(err.Error(), "preprocessor") {
			t.Errorf("Export with %+v: error %v, want one about the preprocessor", bad, err)
		}
		if vs, _ := estimator.Versions(base); len(vs) > 0 {
			t.Errorf("Export with %+v wrote versions %v", bad, vs)
		}
	}
}

// TestRegisterPreprocessorTwicePanics: as sql.Register, a kind registered
// twice panics; and so do an empty kind and a nil loader.
func TestRegisterPreprocessorPanics(t *testing.T) {
	for _, tc := range []struct {
		kind string
		load func([]byte) (dataset.Parser, error)
	}{{embedtest.VocabKind, embedtest.LoadWords}, {"", embedtest.LoadWords}, {"towerflowtest/nil", nil}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterPreprocessor(%q) did not panic", tc.kind)
				}
			}()
			export.RegisterPreprocessor(tc.kind, tc.load)
		}()
	}
	if !slices.Contains(export.PreprocessorKinds(), embedtest.VocabKind) {
		t.Errorf("PreprocessorKinds() = %q, want it to hold %q", export.PreprocessorKinds(), embedtest.VocabKind)
	}
}

// wrongParser makes what its mode says of embedtest.TheWords's batch: a
// dense "cat", no "x", a sparse "x", a panic, a batch of one row.
type wrongParser struct{ Mode string }

func (w wrongParser) Parse(examples []dataset.Example) (sharding.Batch, error) {
	b, err := embedtest.TheWords.Parse(examples)
	if err != nil {
		return b, err
	}
	switch w.Mode {
	case "dense cat":
		b.Features["cat"] = b.Features["x"]
		delete(b.Sparse, "cat")
	case "no x":
		delete(b.Features, "x")
	case "sparse x":
		b.Sparse["x"] = b.Sparse["w"]
		delete(b.Features, "x")
	case "panic":
		panic("wrong parser")
	case "one row":
		b.Features["x"] = tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float64{0}))
	}
	return b, nil
}

const wrongKind = "towerflowtest/wrong"

func init() {
	export.RegisterPreprocessor(wrongKind, func(config []byte) (dataset.Parser, error) {
		var w wrongParser
		err := json.Unmarshal(config, &w)
		return w, err
	})
}

// TestPreprocessorFailures: a preprocessor that does not make the
// signature's inputs, panics or makes a batch of the wrong rows fails
// with an error of the export naming it, not one of the request.
func TestPreprocessorFailures(t *testing.T) {
	est, mdl, _ := exportWords(t, 1, wordsCSV(t))
	examples := []dataset.Example{{"word": {Bytes: [][]byte{[]byte("red")}}}, {}}
	for _, tc := range []struct{ mode, want string }{
		{"dense cat", `made input "cat" dense, the signature takes it sparse`},
		{"no x", `made no input "x"`},
		{"sparse x", `made input "x" sparse`},
		{"panic", "panic during Parse: wrong parser"},
		{"one row", `a batch of 2 examples gave feature "x" without 2 rows`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			dir, err := est.Export(context.Background(), t.TempDir(), embedtest.Serving, estimator.Preprocess(badPreprocessor{kind: wrongKind, json: `{"Mode": "` + tc.mode + `"}`}))
			must(t, err)
			p := load(t, dir, mdl)
			_, err = p.PredictExamples(context.Background(), "serving_default", examples)
			wanterr.Mentions(t, err, wrongKind, tc.want)
			if errors.Is(err, export.ErrBadInput) {
				t.Errorf("the error %v wraps ErrBadInput: the preprocessor failed, not the request", err)
			}
		})
	}
}

// boundedWordsKind is the kind of boundedWords' exports.
const boundedWordsKind = "towerflow-test/bounded-words"

// boundedWords is embedtest's Words as a dataset.BoundedParser of its own
// kind, which records the bounds each ParseBounded was given.
type boundedWords struct{ *embedtest.Words }

var boundsGiven struct {
	sync.Mutex
	got []map[string]int
}

func (boundedWords) PreprocessKind() string { return boundedWordsKind }

func (b boundedWords) ParseBounded(examples []dataset.Example, most map[string]int) (sharding.Batch, error) {
	boundsGiven.Lock()
	boundsGiven.got = append(boundsGiven.got, maps.Clone(most))
	boundsGiven.Unlock()
	return b.Parse(examples)
}

func init() {
	export.RegisterPreprocessor(boundedWordsKind, func(config []byte) (dataset.Parser, error) {
		p, err := embedtest.LoadWords(config)
		if err != nil {
			return nil, err
		}
		return boundedWords{p.(*embedtest.Words)}, nil
	})
}

// TestPreprocessGivesTheWidths: a preprocessor that is a
// dataset.BoundedParser is given the signature's sparse inputs and their
// widths, weights included, dense inputs not.
func TestPreprocessGivesTheWidths(t *testing.T) {
	path := wordsCSV(t)
	est, mdl, _ := exportWords(t, 1, path)
	dir, err := est.Export(context.Background(), t.TempDir(), embedtest.Serving, estimator.Preprocess(boundedWords{embedtest.TheWords}))
	must(t, err)
	p := load(t, dir, mdl)
	boundsGiven.Lock()
	boundsGiven.got = nil
	boundsGiven.Unlock()
	_, err = p.PredictExamples(context.Background(), "serving_default", csvExamples(t, path))
	must(t, err)
	boundsGiven.Lock()
	defer boundsGiven.Unlock()
	want := []map[string]int{{"cat": embedtest.Width, "w": embedtest.Width}}
	if diff := cmp.Diff(want, boundsGiven.got); diff != "" {
		t.Errorf("bounds given (-want +got):\n%s", diff)
	}
}

// TestLoadPreprocessor rebuilds an export's preprocessor without the
// model: the one exported, nothing for an export without one, an error
// for a preprocessor file changed since the export or a directory that
// is no version.
func TestLoadPreprocessor(t *testing.T) {
	path := wordsCSV(t)
	est, _, dir := exportWords(t, 1, path)
	plainDir, err := est.Export(context.Background(), t.TempDir(), embedtest.Serving)
	must(t, err)
	changed := filepath.Join(t.TempDir(), filepath.Base(dir))
	must(t, os.CopyFS(changed, os.DirFS(dir)))
	pre := filepath.Join(changed, filepath.FromSlash(exportdir.PreprocessorFile))
	data, err := os.ReadFile(pre)
	must(t, err)
	must(t, os.WriteFile(pre, []byte(strings.Replace(string(data), "red", "rod", 1)), 0o644))
	// A variable's file changed, its size kept: only Load reads it.
	varChanged := filepath.Join(t.TempDir(), filepath.Base(dir))
	must(t, os.CopyFS(varChanged, os.DirFS(dir)))
	vars, err := filepath.Glob(filepath.Join(varChanged, exportdir.VariablesDir, "*", "*.npy"))
	must(t, err)
	if len(vars) == 0 {
		t.Fatal("no variable files in the export")
	}
	b, err := os.ReadFile(vars[0])
	must(t, err)
	b[len(b)-1] ^= 1
	must(t, os.WriteFile(vars[0], b, 0o644))
	type got struct {
		Kind  string
		Vocab []string
	}
	for _, tc := range []struct {
		name string
		dir  string
		want got
		err  []string
	}{
		{"exported with one", dir, got{embedtest.VocabKind, embedtest.TheWords.Vocab}, nil},
		{"exported without", plainDir, got{}, nil},
		{"a variable changed", varChanged, got{embedtest.VocabKind, embedtest.TheWords.Vocab}, nil},
		{"changed since", changed, got{}, []string{"load the preprocessor of " + changed, exportdir.PreprocessorFile}},
		{"not a version", filepath.Dir(dir), got{}, []string{"load the preprocessor of " + filepath.Dir(dir)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, kind, err := export.LoadPreprocessor(tc.dir)
			if tc.err != nil {
				wanterr.Mentions(t, err, tc.err...)
				return
			}
			must(t, err)
			g := got{Kind: kind}
			if w, ok := p.(*embedtest.Words); ok {
				g.Vocab = w.Vocab
			} else if p != nil {
				t.Fatalf("a %T, want *embedtest.Words or nil", p)
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
