package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// coreRoundTrip is the time a value takes to go from one core to another
// and back: two goroutines, each locked to a thread of its own, take
// turns to write one atomic counter, n times each. It measures nothing,
// and reports false, with fewer than two processors (a spinning goroutine
// would hold the only one until preempted).
//
// On a virtual machine the figure tells where the host has put the two
// cores: near each other (a shared cache) or far apart, where every byte
// two towers exchange costs several times more (docs/performance.md).
func coreRoundTrip(n int) (time.Duration, bool) {
	if runtime.GOMAXPROCS(0) < 2 || n < 1 {
		return 0, false
	}
	var turn atomic.Int64
	var wg sync.WaitGroup
	player := func(first int64) {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := range int64(n) {
			want := 2*i + first
			for turn.Load() != want {
			}
			turn.Store(want + 1)
		}
	}
	wg.Add(2)
	start := time.Now()
	go player(0)
	go player(1)
	wg.Wait()
	return time.Since(start) / time.Duration(n), true
}
