package runner

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/wanterr"
)

// SetAvailableMemory makes AvailableMemory answer n (ok false for a
// negative n) until the test ends.
func SetAvailableMemory(t *testing.T, n int64) {
	old := AvailableMemory
	AvailableMemory = func() (int64, bool) { return n, n >= 0 }
	t.Cleanup(func() { AvailableMemory = old })
}

func TestCheck(t *testing.T) {
	SetAvailableMemory(t, 24e9)
	tests := []struct {
		name  string
		check func(c *Check)
		// want are the lines of the error; none: no error.
		want []string
	}{
		{"int in range", func(c *Check) { c.Int("batch", 1, 1, 10) }, nil},
		{"int below", func(c *Check) { c.Int("examples", -5, 1, NoLimit) }, []string{"-examples -5: want at least 1"}},
		{"int above", func(c *Check) { c.Int("towers", 2000, 0, 1024) }, []string{"-towers 2000: want 0 to 1024"}},
		{"float in range", func(c *Check) { c.Float("lr", 0.5, 0, math.Inf(1)) }, nil},
		{"float NaN", func(c *Check) { c.Float("lr", math.NaN(), 0, math.Inf(1)) }, []string{"-lr NaN: want a finite number, at least 0"}},
		{"float infinite", func(c *Check) { c.Float("lr", math.Inf(1), 0, math.Inf(1)) }, []string{"-lr +Inf: want a finite number, at least 0"}},
		{"float above", func(c *Check) { c.Float("momentum", 2, 0, 1) }, []string{"-momentum 2: want a number from 0 to 1"}},
		{"one of", func(c *Check) { c.OneOf("model", "rnn", "mlp", "cnn") }, []string{`-model "rnn": want mlp or cnn`}},
		{"fits", func(c *Check) { c.Memory("-hidden 128", "the weights", 1e9) }, nil},
		{"does not fit", func(c *Check) {
			c.Memory("-hidden 100000000", "the weights and optimizer slots", ModelBytes(7.95e10, 4, 1))
		}, []string{"-hidden 100000000 needs about 636 GB for the weights and optimizer slots; this machine has 24 GB available"}},
		{"several", func(c *Check) {
			c.Int("batch", 0, 1, NoLimit)
			c.Int("steps", 5, 0, NoLimit)
			c.Int("workers", -1, 0, 64)
		}, []string{"-batch 0: want at least 1", "-workers -1: want 0 to 64"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Check
			tc.check(&c)
			err := c.Err()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wanterr.Mentions(t, err, tc.want...)
			if got := len(c.errs); got != len(tc.want) {
				t.Errorf("%d errors, want %d: %v", got, len(tc.want), err)
			}
		})
	}
}

// TestMemoryUnknown: where the machine's memory is unknown, nothing is
// refused.
func TestMemoryUnknown(t *testing.T) {
	SetAvailableMemory(t, -1)
	var c Check
	c.Memory("-hidden 100000000", "the weights", 1e15)
	if err := c.Err(); err != nil {
		t.Error(err)
	}
}

func TestMemAvailable(t *testing.T) {
	tests := []struct {
		meminfo string
		want    int64
		ok      bool
	}{
		{"MemTotal:       32768000 kB\nMemFree:         1000 kB\nMemAvailable:   23437500 kB\n", 23437500 * 1024, true},
		{"MemTotal:       32768000 kB\nMemFree:         1000 kB\n", 0, false},
		{"MemAvailable:   many kB\n", 0, false},
		{"MemAvailable:   12 MB\n", 0, false},
		{"MemAvailable:   -12 kB\n", 0, false},
		{"MemAvailable:   99999999999999999 kB\n", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		n, ok := memAvailable([]byte(tc.meminfo))
		if diff := cmp.Diff([2]any{tc.want, tc.ok}, [2]any{n, ok}); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.meminfo, diff)
		}
	}
}
