package main

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/estimator"
)

var (
	runLine   = regexp.MustCompile(`^model=(mlp|cnn) impl=(towerflow|gorgonia) towers=(\d+) samples_per_sec=\d+(\.\d+)? step_ms_p50=\d+(\.\d+)?$`)
	ratioLine = regexp.MustCompile(`^ratio (towerflow/gorgonia towers=1|towers=\d+/towers=1): \d+(\.\d+)?$`)
)

// TestRun trains every model with every implementation, written with both
// kits of layers, for two steps on tiny batches and checks the output's
// format, not its speeds.
func TestRun(t *testing.T) {
	for _, c := range []struct{ model, ops string }{{"mlp", "layers"}, {"cnn", "layers"}, {"mlp", "gorgonia"}, {"cnn", "gorgonia"}} {
		model := c.model
		t.Run(model+"/"+c.ops, func(t *testing.T) {
			var out strings.Builder
			cfg := config{model: model, batch: 4, steps: 2, warmup: 1, towers: []int{1, 2}, impls: []string{"towerflow", "gorgonia"}, ops: c.ops, seed: 1}
			if err := run(context.Background(), cfg, &out); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			want := []string{
				"model=" + model + " impl=towerflow towers=1 ",
				"model=" + model + " impl=gorgonia towers=1 ",
				"model=" + model + " impl=towerflow towers=2 ",
				"ratio towerflow/gorgonia towers=1: ",
				"ratio towers=2/towers=1: ",
			}
			if len(lines) != len(want) {
				t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
			}
			for i, l := range lines {
				re := runLine
				if i >= 3 {
					re = ratioLine
				}
				if !re.MatchString(l) || !strings.HasPrefix(l, want[i]) {
					t.Errorf("line %d = %q, want %q... matching %v", i, l, want[i], re)
				}
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	for _, cfg := range []config{
		{model: "rnn", steps: 1, towers: []int{1}, impls: []string{"towerflow"}},
		{model: "mlp", batch: 4, steps: 1, towers: []int{1}, impls: []string{"tensorflow"}},
		{model: "mlp", batch: 4, steps: 0, towers: []int{1}, impls: []string{"towerflow"}},
		{model: "mlp", batch: 4, steps: 1, towers: []int{1}, impls: []string{"towerflow"}, ops: "keras"},
	} {
		if err := run(context.Background(), cfg, &strings.Builder{}); err == nil {
			t.Errorf("run(%+v) = nil error, want one", cfg)
		}
	}
}

// BenchmarkStep times one training step (an op is a step) of every model,
// implementation and towers count at the command's default batch sizes:
//
//	go test -run '^$' -bench . -benchmem ./cmd/towerbench
func BenchmarkStep(b *testing.B) {
	for _, model := range []string{"mlp", "cnn"} {
		m := models[model]
		for _, c := range []struct {
			impl   string
			towers int
		}{{"towerflow", 1}, {"gorgonia", 1}, {"towerflow", 2}} {
			b.Run(fmt.Sprintf("model=%s/impl=%s/towers=%d", model, c.impl, c.towers), func(b *testing.B) {
				tr, err := newTrainer(c.impl, m, kits["layers"], m.defaultBatch, c.towers, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer tr.close()
				ctx := context.Background()
				if err := tr.train(ctx, 2, nil); err != nil { // build the graphs
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				if err := tr.train(ctx, b.N, nil); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N*m.defaultBatch)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// TestEmbed trains model embed on small tables and batches on 1 and 2
// towers, with Adagrad and SGD: run prints its lines (towerflow only), and
// the loss of training on the 4 batches in turn stays finite and falls.
func TestEmbed(t *testing.T) {
	embedLine := regexp.MustCompile(`^model=embed impl=towerflow towers=(1|2) samples_per_sec=\d+(\.\d+)? step_ms_p50=\d+(\.\d+)?$`)
	var out strings.Builder
	cfg := config{model: "embed", batch: 8, steps: 2, warmup: 1, towers: []int{1, 2}, impls: []string{"towerflow", "gorgonia"}, rows: 50, seed: 1}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !embedLine.MatchString(lines[0]) || !embedLine.MatchString(lines[1]) || !ratioLine.MatchString(lines[2]) {
		t.Errorf("output:\n%s\nwant two lines matching %v and a ratio", out.String(), embedLine)
	}
	for _, c := range []struct {
		optimizer string
		towers    int
	}{{"adagrad", 1}, {"adagrad", 2}, {"sgd", 2}} {
		t.Run(fmt.Sprintf("%s/towers=%d", c.optimizer, c.towers), func(t *testing.T) {
			const steps = 40
			cfg := config{model: "embed", batch: 32, rows: 50, optimizer: c.optimizer, seed: 1}
			tr, err := newEmbedTrainer(cfg, c.towers)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.close()
			var losses []float64
			if err := tr.est.Train(context.Background(), tr.input, estimator.Steps(steps),
				estimator.OnStep(func(_ int64, loss float64) { losses = append(losses, loss) })); err != nil {
				t.Fatal(err)
			}
			if len(losses) != steps {
				t.Fatalf("%d losses, want %d", len(losses), steps)
			}
			mean := func(ls []float64) float64 {
				s := 0.0
				for _, l := range ls {
					if math.IsNaN(l) || math.IsInf(l, 0) {
						t.Fatalf("loss %v in %v", l, losses)
					}
					s += l
				}
				return s / float64(len(ls))
			}
			// The first and last 8 steps each see every batch twice.
			if first, last := mean(losses[:8]), mean(losses[steps-8:]); !(last < first) {
				t.Errorf("mean loss of the last 8 steps %v, of the first 8 %v: want it lower\n%v", last, first, losses)
			}
		})
	}
}

func TestEmbedErrors(t *testing.T) {
	for _, cfg := range []config{
		{model: "embed", batch: 4, steps: 1, towers: []int{1}, impls: []string{"towerflow"}, rows: 1},
		{model: "embed", batch: 4, steps: 1, towers: []int{1}, impls: []string{"towerflow"}, rows: 10, optimizer: "adam"},
		{model: "mlp", batch: 4, steps: 1, towers: []int{1}, impls: []string{"towerflow"}, rows: 10},
		{model: "mlp", batch: 4, steps: 1, towers: []int{1}, impls: []string{"towerflow"}, optimizer: "sgd"},
	} {
		if err := run(context.Background(), cfg, &strings.Builder{}); err == nil {
			t.Errorf("run(%+v) = nil error, want one", cfg)
		}
	}
}
