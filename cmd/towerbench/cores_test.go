package main

import (
	"runtime"
	"testing"
)

func TestCoreRoundTrip(t *testing.T) {
	tests := []struct {
		procs, n int
		want     bool
	}{
		{2, 1000, true},
		{3, 10, true},
		{1, 1000, false}, // a spinning goroutine would hold the only processor
		{2, 0, false},
	}
	for _, tc := range tests {
		old := runtime.GOMAXPROCS(tc.procs)
		d, ok := coreRoundTrip(tc.n)
		runtime.GOMAXPROCS(old)
		if ok != tc.want || ok != (d > 0) {
			t.Errorf("GOMAXPROCS %d, %d round trips: %v, %v; want measured %v, a positive time when measured", tc.procs, tc.n, d, ok, tc.want)
		}
	}
}
