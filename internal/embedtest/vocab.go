package embedtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/sharding"
)

// VocabKind is the preprocessor kind of Words, which the tests that load
// it register (export.RegisterPreprocessor(VocabKind, LoadWords)).
const VocabKind = "towerflowtest/vocab"

// Words is a small feature transformation of raw records into Model's
// inputs, a dataset.Parser and an estimator.Preprocessor: the raw
// feature "word", any number of strings, becomes the bag "cat" of their
// ids in Vocab (a word not in it takes the id len(Vocab), its
// out-of-vocabulary id), each of weight "w" 1; the raw "num", one float
// (0 when missing), becomes "x"; the raw "label", one float, becomes the
// label "y" (missing from every record, there are no labels; from some,
// it is an error).
type Words struct {
	Vocab []string `json:"vocab"`
}

// PreprocessKind is VocabKind.
func (w *Words) PreprocessKind() string { return VocabKind }

// MarshalJSON writes the vocabulary.
func (w *Words) MarshalJSON() ([]byte, error) {
	type plain Words
	return json.Marshal((*plain)(w))
}

// LoadWords reads Words from its JSON.
func LoadWords(config []byte) (dataset.Parser, error) {
	type plain Words
	var w plain
	if err := json.Unmarshal(config, &w); err != nil {
		return nil, err
	}
	if len(w.Vocab) >= Vocab {
		return nil, fmt.Errorf("%d words: the table has %d ids, one for unknown words", len(w.Vocab), Vocab)
	}
	return (*Words)(&w), nil
}

// RawSpec describes the raw features.
func (w *Words) RawSpec() map[string]dataset.FeatureSpec {
	return map[string]dataset.FeatureSpec{
		"word":  {Dtype: tensor.String, VarLen: true},
		"num":   {Dtype: tensor.Float32, Shape: []int{1}, Default: dataset.Feature{Floats: []float32{0}}},
		"label": {Dtype: tensor.Float32, Shape: []int{1}, Label: true},
	}
}

// Parse transforms examples.
func (w *Words) Parse(examples []dataset.Example) (sharding.Batch, error) {
	rows := len(examples)
	var (
		idx   [][]int
		ids   []int64
		ws    []float64
		xs    = make([]float64, rows)
		ys    []float64
		width = 1
	)
	labels := 0
	for _, ex := range examples {
		if _, ok := ex["label"]; ok {
			labels++
		}
	}
	if labels > 0 && labels < rows {
		for i, ex := range examples {
			if _, ok := ex["label"]; !ok {
				return sharding.Batch{}, &dataset.ParseError{Example: i, Feature: "label", Err: fmt.Errorf("missing, and %d other examples have it", labels)}
			}
		}
	}
	for i, ex := range examples {
		word := ex["word"]
		if word.Len() > 0 && word.Kind() != dataset.KindBytes {
			return sharding.Batch{}, &dataset.ParseError{Example: i, Feature: "word", Err: fmt.Errorf("holds %s values, want bytes", word.Kind())}
		}
		for j, b := range word.Bytes {
			id := slices.Index(w.Vocab, string(b))
			if id < 0 {
				id = len(w.Vocab)
			}
			idx = append(idx, []int{i, j})
			ids = append(ids, int64(id))
			ws = append(ws, 1)
		}
		width = max(width, word.Len())
		if num, ok := ex["num"]; ok {
			if num.Kind() != dataset.KindFloat || num.Len() != 1 {
				return sharding.Batch{}, &dataset.ParseError{Example: i, Feature: "num", Err: fmt.Errorf("holds %d %s values, want one float", num.Len(), num.Kind())}
			}
			xs[i] = float64(num.Floats[0])
		}
		if labels > 0 {
			l := ex["label"]
			if l.Kind() != dataset.KindFloat || l.Len() != 1 {
				return sharding.Batch{}, &dataset.ParseError{Example: i, Feature: "label", Err: errors.New("want one float")}
			}
			ys = append(ys, float64(l.Floats[0]))
		}
	}
	if idx == nil {
		idx = [][]int{}
	}
	b := sharding.Batch{
		Features: map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(rows, 1), tensor.WithBacking(xs))},
		Sparse: map[string]sharding.SparseCOO{
			"cat": {Indices: idx, Values: tensor.New(tensor.WithShape(len(ids)), tensor.WithBacking(append([]int64{}, ids...))), DenseShape: []int{rows, width}},
			"w":   {Indices: cloneIndices(idx), Values: tensor.New(tensor.WithShape(len(ws)), tensor.WithBacking(append([]float64{}, ws...))), DenseShape: []int{rows, width}},
		},
	}
	if labels > 0 {
		b.Labels = map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(rows, 1), tensor.WithBacking(ys))}
	}
	return b, nil
}

func cloneIndices(idx [][]int) [][]int {
	out := make([][]int, len(idx))
	for i, ix := range idx {
		out[i] = slices.Clone(ix)
	}
	return out
}

// TheWords is the vocabulary of the tests' Words.
var TheWords = &Words{Vocab: []string{"red", "green", "blue", "cyan", "pink"}}

// WordsSchema is the schema of WordsCSV's files: word, num (which may be
// empty: 0) and label.
var WordsSchema = dataset.Schema{
	{Name: "word", Kind: dataset.KindBytes},
	{Name: "num", Kind: dataset.KindFloat, Optional: true},
	{Name: "label", Kind: dataset.KindFloat},
}

// WordsCSV is raw records for Words as a CSV file with a header: words
// of the vocabulary and others, numbers and empty ones, and labels
// 1 - num (plus 0.5 for "blue").
const WordsCSV = `word,num,label
red,0.5,0.5
blue,-1,2.5
green,,1
mauve,2,-1
pink,0.25,0.75
cyan,1.5,-0.5
blue,0,1.5
teal,-0.5,1.5
`
