package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/towers"
)

// TestRunBF16: -precision bf16 trains the cnn in bfloat16: the engine
// gets the precision, as its warning about what falls back to float32
// shows wherever something does (layers.BF16Support).
func TestRunBF16(t *testing.T) {
	var log bytes.Buffer
	var out strings.Builder
	cfg := config{model: "cnn", batch: 4, steps: 2, warmup: 1, towers: []int{2}, impls: []string{"towerflow"}, ops: "layers", seed: 1,
		precision: towers.BFloat16, log: slog.New(slog.NewTextHandler(&log, nil))}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "model=cnn impl=towerflow towers=2 ") {
		t.Errorf("output %q, want a line for the cnn on 2 towers", out.String())
	}
	conv, matmul, _, _ := layers.BF16Support()
	if logged := strings.Contains(log.String(), "Config.Precision is bfloat16"); logged == (conv && matmul) {
		t.Errorf("bfloat16 convolutions %t, matrix products %t, but the engine's warning logged %t: %q", conv, matmul, logged, log.String())
	}
}
