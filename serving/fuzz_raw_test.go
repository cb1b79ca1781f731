package serving

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/embedtest"
	"github.com/towerflow/towerflow/sharding"
)

// wordsServable serves raw records through embedtest.TheWords: its
// signatures take the model's inputs, and answer "p" = x + the sum of
// the ids of each example. It records the rows of the last run.
type wordsServable struct {
	mu   sync.Mutex
	rows int
}

func (*wordsServable) Version() int64 { return 1 }
func (*wordsServable) Close() error   { return nil }

func (*wordsServable) Signatures() map[string]export.Signature {
	in := map[string]export.TensorInfo{
		"cat": {Dtype: "int64", Shape: []int{-1, embedtest.Width}, Sparse: true},
		"w":   {Dtype: "float64", Shape: []int{-1, embedtest.Width}, Sparse: true},
		"x":   {Dtype: "float64", Shape: []int{-1, 1}},
	}
	out := map[string]export.TensorInfo{"p": {Dtype: "float64", Shape: []int{-1, 1}}}
	return map[string]export.Signature{
		"serving_default": {Method: "predict", Inputs: in, Outputs: out},
		"regress":         {Method: "regress", Inputs: in, Outputs: map[string]export.TensorInfo{"outputs": out["p"]}},
	}
}

func (*wordsServable) Preprocessor() (string, bool) { return embedtest.VocabKind, true }

func (*wordsServable) RawSpec() map[string]dataset.FeatureSpec { return embedtest.TheWords.RawSpec() }

func (*wordsServable) Preprocess(_ string, examples []dataset.Example) (map[string]*tensor.Dense, map[string]sharding.SparseCOO, error) {
	b, err := dataset.ParseGuarded(embedtest.TheWords, examples)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", export.ErrBadInput, err)
	}
	return b.Features, b.Sparse, nil
}

func (s *wordsServable) Run(ctx context.Context, sig string, features map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	return s.RunSparse(ctx, sig, features, nil)
}

func (s *wordsServable) RunSparse(_ context.Context, sig string, features map[string]*tensor.Dense, sparse map[string]sharding.SparseCOO) (map[string]*tensor.Dense, error) {
	x := features["x"].Data().([]float64)
	p := append([]float64(nil), x...)
	cat := sparse["cat"]
	for i, idx := range cat.Indices {
		p[idx[0]] += float64(cat.Values.Data().([]int64)[i])
	}
	s.mu.Lock()
	s.rows = len(x)
	s.mu.Unlock()
	name := "p"
	if sig == "regress" {
		name = "outputs"
	}
	return map[string]*tensor.Dense{name: tensor.New(tensor.WithShape(len(p), 1), tensor.WithBacking(p))}, nil
}

// FuzzRawRequest posts raw-value requests, predict's rows and columns
// and regress's examples, to a version with a preprocessor: the server
// never fails (5xx) nor answers anything but a JSON object, {"error"}
// with a 4xx, or one answer for each example preprocessed.
func FuzzRawRequest(f *testing.F) {
	for _, s := range []string{
		`{"instances": [{"word": "red", "num": 1}, {"word": ["blue", "x"]}, {"word": {"b64": "cGluaw=="}, "num": 2.5}]}`,
		`{"inputs": {"word": ["red", []], "num": [1, 0]}}`,
		`{"signature_name": "regress", "context": {"num": 3}, "examples": [{"word": "teal"}, {}]}`,
		`{"instances": [{"word": "red"}, {"word": "red", "label": 1}]}`,
		`{"instances": [{"word": [1, "a"], "num": "x"}]}`, `{"inputs": {"word": ["a"], "num": [1, 2]}}`,
		`{"instances": [{"word": ["a", "b", "c", "d", "e"]}]}`, `{"instances": [{"word": null}]}`,
		`{"instances": [{"word": {"b64": "%%"}}]}`, `{"inputs": {}}`, `{"instances": []}`, `{"instances": ["red"]}`,
		`{"instances": [{"num": 1}, {"word": []}]}`,
	} {
		f.Add([]byte(s))
	}
	ws := &wordsServable{}
	srv, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(ws)}}, Config{MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	f.Fuzz(func(t *testing.T, body []byte) {
		path := "/v1/models/m:predict"
		if bytes.Contains(body, []byte(`"examples"`)) {
			path = "/v1/models/m:regress"
		}
		ws.mu.Lock()
		ws.rows = -1
		ws.mu.Unlock()
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("POST", path, bytes.NewReader(body)))
		answer := w.Body.Bytes()
		if w.Code >= 500 {
			t.Fatalf("POST %s %q: status %d: %s", path, body, w.Code, answer)
		}
		var doc map[string][]json.RawMessage
		if err := json.Unmarshal(answer, &doc); err != nil && w.Code == http.StatusOK {
			t.Fatalf("POST %s %q: status 200, not an object of lists: %s", path, body, answer)
		}
		if w.Code != http.StatusOK {
			var e map[string]string
			if err := json.Unmarshal(answer, &e); err != nil || len(e) != 1 || e["error"] == "" {
				t.Fatalf("POST %s %q: status %d: %s, want {\"error\": ...}", path, body, w.Code, answer)
			}
			return
		}
		ws.mu.Lock()
		rows := ws.rows
		ws.mu.Unlock()
		n := -1
		for _, key := range []string{"predictions", "results"} {
			if list, ok := doc[key]; ok {
				n = len(list)
			}
		}
		if list, ok := doc["outputs"]; ok {
			n = len(list)
		}
		if n != rows {
			t.Fatalf("POST %s %q: %d answers for %d examples run: %s", path, body, n, rows, answer)
		}
	})
}
