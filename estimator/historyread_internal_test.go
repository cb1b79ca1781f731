package estimator

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestReadHistory: the readers take what the history hook and Evaluate
// write; a torn last line is skipped with a warning naming it, a bad line
// elsewhere, or one over MaxHistoryLine, is an error naming file and line.
func TestReadHistory(t *testing.T) {
	const good = `{"step":10,"loss":0.5,"time":"2026-11-21T23:00:00Z"}` + "\n"
	want := []TrainRecord{{Step: 10, Loss: 0.5, Time: time.Date(2026, 11, 21, 23, 0, 0, 0, time.UTC)}}
	tests := []struct {
		name string
		file string
		want []TrainRecord
		// warn is what the warning says, err what the error says; empty:
		// none.
		warn, err []string
	}{
		{"good", good, want, nil, nil},
		{"empty", "", nil, nil, nil},
		{"blank lines", "\n" + good + "  \n", want, nil, nil},
		{"torn last line", good + `{"step":20,"lo`, want, []string{"f.jsonl:2:", "skipped the last line", "no newline"}, nil},
		{"torn last line, only", `{"st`, nil, []string{"f.jsonl:1:", "skipped the last line"}, nil},
		{"last line without newline, whole", good + `{"step":20,"loss":0.25}`, append(want, TrainRecord{Step: 20, Loss: 0.25}), nil, nil},
		{"bad last line with its newline", good + `{"step":20,"lo` + "\n", nil, nil, []string{"f.jsonl:2:", "unexpected EOF"}},
		{"bad line in the middle", good + `{"step":20,"lo` + "\n" + good, nil, nil, []string{"f.jsonl:2:", "unexpected EOF"}},
		{"no loss", good + `{"step":20}` + "\n", nil, nil, []string{"f.jsonl:2:", `no "loss"`}},
		{"line over the cap", good + `{"step":20,"loss":0.25,"x":"` + strings.Repeat("a", MaxHistoryLine) + "\"}\n", nil, nil, []string{"f.jsonl:2:", "longer than 1048576 bytes"}},
		{"torn line over the cap", good + strings.Repeat("a", MaxHistoryLine+1), nil, nil, []string{"f.jsonl:2:", "longer than 1048576 bytes"}},
		{"line at the cap", good + `{"step":20,"loss":0.25,"x":"` + strings.Repeat("a", MaxHistoryLine-len(`{"step":20,"loss":0.25,"x":""}`)-1) + "\"}\n", append(want, TrainRecord{Step: 20, Loss: 0.25}), nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var warnings []error
			got, err := ReadTrainHistory(strings.NewReader(tc.file), "f.jsonl", func(err error) { warnings = append(warnings, err) })
			if tc.err != nil {
				wanterr.Mentions(t, err, tc.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if tc.warn == nil {
				if len(warnings) > 0 {
					t.Errorf("warnings %v, want none", warnings)
				}
				return
			}
			if len(warnings) != 1 {
				t.Fatalf("warnings %v, want one", warnings)
			}
			wanterr.Mentions(t, warnings[0], tc.warn...)
		})
	}
}

// TestReadEvalHistory: the eval reader's own checks, and a torn last line.
func TestReadEvalHistory(t *testing.T) {
	const good = `{"step":10,"metrics":{"loss":0.5}}` + "\n"
	tests := []struct {
		name, file string
		want       []EvalRecord
		err        []string
	}{
		{"good", good, []EvalRecord{{Step: 10, Metrics: map[string]float64{"loss": 0.5}}}, nil},
		{"torn", good + `{"step":20,"metrics":{"lo`, []EvalRecord{{Step: 10, Metrics: map[string]float64{"loss": 0.5}}}, nil},
		{"no metrics", `{"step":10}` + "\n", nil, []string{"e.jsonl:1:", `no "metrics"`}},
		{"no step", good + `{"metrics":{}}` + "\n", nil, []string{"e.jsonl:2:", `no "step"`}},
		{"metric not a number", `{"step":10,"metrics":{"accuracy":"high"}}` + "\n", nil, []string{"e.jsonl:1:", `metric "accuracy" is "high", not a number`}},
		{"not an object", "[1]\n", nil, []string{"e.jsonl:1:", "not a JSON object"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadEvalHistory(strings.NewReader(tc.file), "e.jsonl", nil)
			if tc.err != nil {
				wanterr.Mentions(t, err, tc.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadHistoryRoundTrip: what the writer appends, the readers read back
// equal.
func TestReadHistoryRoundTrip(t *testing.T) {
	dir := t.TempDir()
	train := []TrainRecord{{Step: 1, Loss: 2.5, Time: time.Date(2026, 11, 21, 23, 0, 0, 0, time.UTC)}, {Step: 2, Loss: 1e-300}}
	eval := []EvalRecord{{Step: 1, Metrics: map[string]float64{"loss": 2, "accuracy": 0.25}}, {Step: 1, Name: "val", Metrics: map[string]float64{}}}
	for _, r := range train {
		if err := appendJSONLine(dir, TrainHistoryFile, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range eval {
		if err := appendJSONLine(dir, EvalHistoryFile, r); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, TrainHistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	gotTrain, err := ReadTrainHistory(bytes.NewReader(b), TrainHistoryFile, failWarn(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(train, gotTrain); diff != "" {
		t.Errorf("train records (-want +got):\n%s", diff)
	}
	if b, err = os.ReadFile(filepath.Join(dir, EvalHistoryFile)); err != nil {
		t.Fatal(err)
	}
	gotEval, err := ReadEvalHistory(bytes.NewReader(b), EvalHistoryFile, failWarn(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(eval, gotEval); diff != "" {
		t.Errorf("eval records (-want +got):\n%s", diff)
	}
}

// failWarn is a warn function that fails t.
func failWarn(t testing.TB) func(error) {
	return func(err error) { t.Errorf("warning: %v", err) }
}
