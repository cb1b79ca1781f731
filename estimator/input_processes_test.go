package estimator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
)

// TestInputParts: FromTensors with Processes, and ShardInput over any
// input, give each process its part of every batch — parts differ by at
// most one row, the first ones larger — and together the batches one
// process reads, shuffled or not.
func TestInputParts(t *testing.T) {
	tests := []struct {
		rows, batch, procs int
		shuffle            bool
	}{
		{10, 4, 2, false},
		{10, 4, 3, false}, // 2, 1, 1 rows; the last batch, 2 rows, dropped
		{12, 6, 4, true},
		{9, 9, 2, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("rows%d_batch%d_procs%d_shuffle%v", tc.rows, tc.batch, tc.procs, tc.shuffle), func(t *testing.T) {
			features, labels := rowData(tc.rows)
			cfg := estimator.TensorInput{BatchSize: tc.batch, Shuffle: tc.shuffle, Seed: 5, DropRemainder: tc.rows%tc.batch < tc.procs && tc.rows%tc.batch != 0}
			whole, err := estimator.FromTensors(features, labels, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := collect(t, context.Background(), whole, true, -1)
			for _, how := range []string{"FromTensors", "ShardInput"} {
				got := make([][]int, len(want))
				for r := range tc.procs {
					in := estimator.ShardInput(whole, r, tc.procs)
					if how == "FromTensors" {
						c := cfg
						c.Processes, c.Rank = tc.procs, r
						if in, err = estimator.FromTensors(features, labels, c); err != nil {
							t.Fatal(err)
						}
					}
					parts := collect(t, context.Background(), in, true, -1)
					if len(parts) != len(want) {
						t.Fatalf("%s: rank %d read %d batches, one process %d", how, r, len(parts), len(want))
					}
					for i, p := range parts {
						if n, size := len(want[i]), len(p); size != n/tc.procs+boolInt(r < n%tc.procs) {
							t.Errorf("%s: rank %d batch %d has %d rows of %d", how, r, i, size, n)
						}
						got[i] = append(got[i], p...)
					}
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%s: the parts in rank order are not one process's batches (-want +got):\n%s", how, d)
				}
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestInputPartErrors(t *testing.T) {
	features, labels := rowData(10)
	tests := []struct {
		name string
		in   func() (estimator.InputFn, error)
		want string
	}{
		{"rank out of range", func() (estimator.InputFn, error) {
			return estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 4, Processes: 2, Rank: 2})
		}, "rank 2 of 2 processes does not exist"},
		{"batch smaller than processes", func() (estimator.InputFn, error) {
			return estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 2, Processes: 3})
		}, "a batch of 2 rows cannot give each of 3 processes a row"},
		{"last batch too small", func() (estimator.InputFn, error) {
			return estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 4, Processes: 3, Rank: 1})
		}, "rows 8 to 10 of epoch 0 for process 1 of 3"},
		{"shard input rank", func() (estimator.InputFn, error) {
			whole, _ := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 4})
			return estimator.ShardInput(whole, -1, 2), nil
		}, "rank -1 of 2 processes does not exist"},
		{"shard input batch too small", func() (estimator.InputFn, error) {
			whole, _ := estimator.FromTensors(features, labels, estimator.TensorInput{BatchSize: 4})
			return estimator.ShardInput(whole, 0, 3), nil
		}, "batch 2 for process 0 of 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := tc.in()
			if err == nil {
				for _, berr := range in(context.Background()) {
					if berr != nil {
						err = berr
						break
					}
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
