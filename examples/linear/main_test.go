package main

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Example_run is what `go run ./examples/linear` prints on stdout (progress
// goes to stderr): the learned line, whatever the number of local devices.
func Example_run() {
	if err := train(context.Background(), options{steps: 400, batch: 100, lr: 0.5, examples: 1000}); err != nil {
		panic(err)
	}
	// Output: w=0.1000 b=0.3000
}

func TestRunErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		batch int
		is    error
		want  string
	}{
		{"batch size 0", context.Background(), 0, nil, "batch size 0"},
		{"cancelled", cancelled, 100, context.Canceled, "train"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := train(tc.ctx, options{steps: 400, batch: tc.batch, lr: 0.5, examples: 1000})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
		})
	}
}
