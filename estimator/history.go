package estimator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// History files of a model directory: JSON Lines, one object a line, for
// other tools (cmd/towerflow plot) to read.
const (
	// TrainHistoryFile holds {"step", "loss", "time"} every LogEvery steps.
	TrainHistoryFile = "train_history.jsonl"
	// EvalHistoryFile holds {"step", "name", "time", "metrics": {...}}
	// for every evaluation ("name" only for a named one, see EvalName).
	EvalHistoryFile = "eval_history.jsonl"
)

// TrainRecord is one line of TrainHistoryFile.
type TrainRecord struct {
	Step int64     `json:"step"`
	Loss float64   `json:"loss"`
	Time time.Time `json:"time"`
}

// EvalRecord is one line of EvalHistoryFile.
type EvalRecord struct {
	Step    int64              `json:"step"`
	Name    string             `json:"name,omitempty"`
	Time    time.Time          `json:"time"`
	Metrics map[string]float64 `json:"metrics"`
}

// appendJSONLine appends v as one line to dir/name, creating both.
func appendJSONLine(dir, name string, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("history %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("history %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("history %s: %w", f.Name(), err)
	}
	return nil
}

// historyHook appends the training loss to TrainHistoryFile every Every
// steps. NaN and infinite losses, which JSON cannot hold, are left out.
type historyHook struct {
	BaseHook
	dir   string
	every int64
}

func (h historyHook) AfterStep(_ context.Context, r StepResult) (bool, error) {
	if h.every <= 0 || r.Step%h.every != 0 || !finite(r.Loss) {
		return false, nil
	}
	return false, appendJSONLine(h.dir, TrainHistoryFile, TrainRecord{Step: r.Step, Loss: r.Loss, Time: time.Now().UTC()})
}

func finite(f float64) bool { return f-f == 0 }
