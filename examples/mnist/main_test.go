package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/estimator/checkpoint"
	"github.com/towerflow/towerflow/examples/mnist/mnist"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
)

// small are the flags of a short run on a small synthetic data set, on two
// towers whatever the machine.
func small() options {
	o := defaults
	o.Towers = 2
	o.steps = 150
	o.batch = 50
	o.synthetic = [2]int{1000, 200}
	o.filters, o.hidden = 4, 32
	o.logEvery = -1
	return o
}

var lastLine = regexp.MustCompile(`^step=(\d+) accuracy=(\d\.\d{4}) loss=(\d+\.\d{4})$`)

// TestSynthetic: without -data, the command writes a synthetic data set
// into a temporary directory, says so, trains on it to well above chance,
// and removes the directory at the end; the last line is the test scores.
func TestSynthetic(t *testing.T) {
	for _, net := range []string{"mlp", "cnn"} {
		t.Run(net, func(t *testing.T) {
			o := small()
			o.net = net
			var out bytes.Buffer
			r, err := train(context.Background(), o, &out)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", out.Bytes())
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("printed %q, want 2 lines", lines)
			}
			dir, ok := strings.CutPrefix(lines[0], "no -data: training on a synthetic data set in MNIST's files (1000 training and 200 test images of seven-segment digits) in ")
			if !ok {
				t.Errorf("first line %q does not say the data is synthetic", lines[0])
			}
			dir = strings.TrimSuffix(dir, ", removed at the end")
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the synthetic data's directory %q: %v, want it removed", dir, err)
			}
			m := lastLine.FindStringSubmatch(lines[1])
			if m == nil || m[1] != "150" {
				t.Fatalf("last line %q, want step=150 accuracy=... loss=...", lines[1])
			}
			if r.scores["accuracy"] < 0.8 {
				t.Errorf("test accuracy %v after 150 steps, want above 0.8", r.scores["accuracy"])
			}
			if diff := cmp.Diff([2]int{28, 28}, [2]int{r.rows, r.cols}); diff != "" {
				t.Errorf("image size (-want +got):\n%s", diff)
			}
		})
	}
}

// TestData: with -data, the command trains on the directory's files, and
// says nothing of synthetic data.
func TestData(t *testing.T) {
	dir := t.TempDir()
	if err := mnist.WriteSynthetic(dir, 300, 100, 7, false); err != nil {
		t.Fatal(err)
	}
	o := small()
	o.data, o.steps = dir, 20
	var out bytes.Buffer
	if _, err := train(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if !lastLine.MatchString(strings.TrimSuffix(out.String(), "\n")) {
		t.Errorf("printed %q, want only the scores", out.String())
	}
}

// historySteps returns the "step" of every line of a history file.
func historySteps(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			Step int64 `json:"step"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		steps = append(steps, rec.Step)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}

// TestModelDirContinues: two runs of 30 steps on one model directory, as
// `go run ./examples/mnist -model_dir=DIR -steps=30` twice: the second
// continues from the first's checkpoint to step 60, and each evaluates its
// final model.
func TestModelDirContinues(t *testing.T) {
	dir := t.TempDir()
	o := small()
	o.ModelDir, o.steps, o.logEvery = dir, 30, 10
	var scores []map[string]float64
	for i := range 2 {
		var out bytes.Buffer
		r, err := train(context.Background(), o, &out)
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		scores = append(scores, r.scores)
	}
	if scores[0]["global_step"] != 30 || scores[1]["global_step"] != 60 {
		t.Errorf("evaluated at steps %v and %v, want 30 and 60", scores[0]["global_step"], scores[1]["global_step"])
	}
	if scores[1]["loss"] >= scores[0]["loss"] {
		t.Errorf("test loss %v after 60 steps, not below %v after 30: the second run did not train on", scores[1]["loss"], scores[0]["loss"])
	}
	if diff := cmp.Diff([]int64{10, 20, 30, 40, 50, 60}, historySteps(t, filepath.Join(dir, estimator.TrainHistoryFile))); diff != "" {
		t.Errorf("train history steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{30, 60}, historySteps(t, filepath.Join(dir, estimator.EvalHistoryFile))); diff != "" {
		t.Errorf("eval history steps (-want +got):\n%s", diff)
	}
}

// TestServe: after a run with -serve, the model directory holds a classify
// request of two test images, and the served model answers it with each
// image's digit and its probability. The checkpoint has the kernels of the
// net -model, -filters and -hidden name.
func TestServe(t *testing.T) {
	for _, tc := range []struct {
		net     string
		kernels map[string][]int
	}{
		{"mlp", map[string][]int{"hidden/kernel": {784, 32}, "logits/kernel": {32, 10}}},
		{"cnn", map[string][]int{"conv1/kernel": {4, 1, 5, 5}, "conv2/kernel": {8, 4, 5, 5}, "dense/kernel": {8 * 7 * 7, 32}, "logits/kernel": {32, 10}}},
	} {
		t.Run(tc.net, func(t *testing.T) {
			o := small()
			o.net = tc.net
			o.ModelDir, o.Serve = t.TempDir(), "localhost:0"
			r, err := train(context.Background(), o, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			ckpt, err := checkpoint.Read(o.ModelDir)
			if err != nil {
				t.Fatal(err)
			}
			kernels := map[string][]int{}
			for _, v := range ckpt.Manifest().Variables {
				if strings.HasSuffix(v.Name, "/kernel") {
					kernels[v.Name] = v.Shape
				}
			}
			if diff := cmp.Diff(tc.kernels, kernels); diff != "" {
				t.Errorf("kernels (-want +got):\n%s", diff)
			}
			n, err := newNet(o)
			if err != nil {
				t.Fatal(err)
			}
			s := runner.Serving{
				Name:     "mnist",
				ModelDir: o.ModelDir,
				Model:    func() (*replicate.Model, error) { return newModel(o) },
				Inputs:   estimator.ServingInput{mnist.ImageKey: servingInput(n, r.rows, r.cols)},
			}
			srv, _, err := s.Server(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			hs := httptest.NewServer(srv)
			defer hs.Close()
			body, err := os.ReadFile(filepath.Join(o.ModelDir, requestFile))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(hs.URL+"/v1/models/mnist:classify", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				Results [][][2]any `json:"results"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			// The request's images are the synthetic test set's first two.
			test := mnist.Synthetic(o.synthetic[1], o.seed+1)
			var labels []any
			for _, res := range got.Results {
				if len(res) != 1 {
					t.Fatalf("results %v, want one [digit, probability] per image", got.Results)
				}
				labels = append(labels, res[0][0])
				if p, ok := res[0][1].(float64); !ok || p <= 0.5 || p > 1 {
					t.Errorf("probability %v of the answer %v, want a confident one", res[0][1], res[0][0])
				}
			}
			if diff := cmp.Diff([]any{string('0' + test.Labels[0]), string('0' + test.Labels[1])}, labels); diff != "" {
				t.Errorf("digits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrainErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	missing := filepath.Join(t.TempDir(), "nothing")
	tests := []struct {
		name string
		ctx  context.Context
		set  func(*options)
		is   error
		want []string
	}{
		{"unknown model", context.Background(), func(o *options) { o.net = "rnn" }, nil, []string{`-model "rnn": want mlp or cnn`}},
		{"negative sizes", context.Background(), func(o *options) { o.hidden = -1 }, nil, []string{"-hidden -1, -filters 4: want 0 (the default) or more"}},
		{"unknown optimizer", context.Background(), func(o *options) { o.optimizer = "sgd" }, nil, []string{`-optimizer "sgd": want momentum or adam`}},
		{"negative towers", context.Background(), func(o *options) { o.Towers = -1 }, nil, []string{"-1 towers"}},
		{"no data", context.Background(), func(o *options) { o.data = missing }, nil, []string{missing, "neither train-images-idx3-ubyte nor train-images-idx3-ubyte.gz"}},
		{"batch larger than the data", context.Background(), func(o *options) { o.batch = 2000 }, nil, []string{"1000 rows make no whole batch of 2000"}},
		{"no synthetic examples", context.Background(), func(o *options) { o.synthetic[1] = 0 }, nil, []string{"1000 training and 0 test examples"}},
		{"cancelled", cancelled, func(*options) {}, context.Canceled, []string{"train"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := small()
			tc.set(&o)
			_, err := train(tc.ctx, o, &bytes.Buffer{})
			wanterr.Mentions(t, err, tc.want...)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
		})
	}
}

// TestFlagErrors: flags out of their range, or asking for more memory than
// the machine has, are refused up front with an error naming the flag and
// what it may be.
func TestFlagErrors(t *testing.T) {
	old := runner.AvailableMemory
	runner.AvailableMemory = func() (int64, bool) { return 24e9, true }
	t.Cleanup(func() { runner.AvailableMemory = old })
	if err := defaults.check(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	tests := []struct {
		name string
		edit func(*options)
		want string
	}{
		{"hidden too large", func(o *options) { o.hidden = 100000000 }, "-hidden 100000000 needs about 636 GB for the weights and optimizer slots; this machine has 24 GB available"},
		{"hidden too large for adam", func(o *options) { o.hidden, o.optimizer = 10000000, "adam" }, "-hidden 10000000 needs about 95 GB for the weights and optimizer slots"},
		{"filters too large", func(o *options) { o.net, o.filters = "cnn", 100000 }, "-filters 100000 -hidden 0 needs about 4010 GB for the weights and optimizer slots"},
		{"hidden out of range", func(o *options) { o.hidden = 1 << 40 }, "-hidden 1099511627776: want 0 to 2147483647"},
		{"negative hidden", func(o *options) { o.hidden = -1 }, "-hidden -1: want 0 to 2147483647"},
		{"negative filters", func(o *options) { o.filters = -3 }, "-filters -3: want 0 to 2147483647"},
		{"model", func(o *options) { o.net = "rnn" }, `-model "rnn": want mlp or cnn`},
		{"optimizer", func(o *options) { o.optimizer = "sgd" }, `-optimizer "sgd": want momentum or adam`},
		{"steps", func(o *options) { o.steps = -1 }, "-steps -1: want at least 0"},
		{"batch", func(o *options) { o.batch = -100 }, "-batch -100: want at least 1"},
		{"lr", func(o *options) { o.lr = math.Inf(1) }, "-lr +Inf: want a finite number, at least 0"},
		{"momentum", func(o *options) { o.momentum = 1.5 }, "-momentum 1.5: want a number from 0 to 1"},
		{"synthetic_train", func(o *options) { o.synthetic[0] = -5 }, "-synthetic_train -5: want at least 100"},
		{"synthetic_train below the batch", func(o *options) { o.synthetic[0] = 50 }, "-synthetic_train 50: want at least 100"},
		{"synthetic_test", func(o *options) { o.synthetic[1] = 0 }, "-synthetic_test 0: want at least 1"},
		{"synthetic data too large", func(o *options) { o.synthetic[0] = 1e10 }, "-synthetic_train 10000000000 -synthetic_test 1000 needs about 39200 GB for the data"},
		{"towers", func(o *options) { o.Towers = 1 << 20 }, "-towers 1048576: want 0 to 1024"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults
			tc.edit(&o)
			wanterr.Mentions(t, o.check(), tc.want)
		})
	}
}
