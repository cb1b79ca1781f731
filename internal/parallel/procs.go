package parallel

import (
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// Go's runtime treats a cgo call (an OpenBLAS product, a oneDNN
// convolution) as a system call. When every processor (P) is held by a
// goroutine in such a call and none is idle, its monitor (sysmon, in
// runtime/proc.go's retake) takes the P of every call that outlasts one of
// its polls, hands it to another thread, and from then on polls every
// 20 µs: the threads it wakes preempt the calls' threads, and the towers'
// goroutines move between threads. With one P idle it leaves calls shorter
// than 10 ms alone. Towers, one per core, hold every P while they are in
// their kernels; HoldSpareProcessor keeps one more P than that while a
// training run goes on, so that one stays idle.

var (
	holdMu    sync.Mutex
	holds     int          // runs holding the spare processor; under holdMu
	raisedTo  int          // the GOMAXPROCS set for them; under holdMu
	baseProcs atomic.Int64 // GOMAXPROCS before the raise while raised, else 0
)

// Cores is the number of processors towerflow spreads work over: GOMAXPROCS,
// or, while HoldSpareProcessor has raised it, the value it had before.
func Cores() int {
	if n := baseProcs.Load(); n > 0 {
		return int(n)
	}
	return runtime.GOMAXPROCS(0)
}

// HoldSpareProcessor raises GOMAXPROCS by one, for as long as the returned
// release has not been called, when towers' goroutines would otherwise hold
// every processor in long cgo calls: cgo says whether the build's kernels
// are foreign (OpenBLAS, oneDNN), towers is the number of towers that run
// at once. Holds nest and overlap: the first raises GOMAXPROCS, the last
// release sets it back to the value it had, unless something else has
// changed it since (then it is left as it is). Nothing is changed when the
// GOMAXPROCS environment variable is set (the user's setting stands), when
// fewer towers than Cores run or when the kernels are Go's. Changes are
// logged to log (at Debug; Info when GOMAXPROCS changed under a hold). release may be called more than once; only the
// first call counts.
func HoldSpareProcessor(log *slog.Logger, towers int, cgo bool) (release func()) {
	if !cgo || towers < 1 || os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	holdMu.Lock()
	defer holdMu.Unlock()
	if holds == 0 {
		base := runtime.GOMAXPROCS(0)
		if towers < base {
			return func() {}
		}
		baseProcs.Store(int64(base))
		raisedTo = base + 1
		runtime.GOMAXPROCS(raisedTo)
		log.Debug("training: GOMAXPROCS raised by one while towers run in cgo calls, so that Go's scheduler leaves their processors alone", "gomaxprocs", raisedTo, "was", base, "towers", towers)
	} else if towers < int(baseProcs.Load()) {
		return func() {}
	}
	holds++
	var once sync.Once
	return func() { once.Do(func() { releaseSpare(log) }) }
}

// releaseSpare ends one hold of HoldSpareProcessor.
func releaseSpare(log *slog.Logger) {
	holdMu.Lock()
	defer holdMu.Unlock()
	if holds--; holds > 0 {
		return
	}
	base := int(baseProcs.Load())
	if now := runtime.GOMAXPROCS(0); now != raisedTo {
		log.Info("training: GOMAXPROCS was changed during training; leaving it", "gomaxprocs", now)
	} else {
		// The runtime's default, when that is what it was, keeps the
		// runtime's own updates of GOMAXPROCS to the CPU limit, which a
		// runtime.GOMAXPROCS call turns off; a value set by a call before
		// training is set again.
		runtime.SetDefaultGOMAXPROCS()
		if runtime.GOMAXPROCS(0) != base {
			runtime.GOMAXPROCS(base)
		}
		log.Debug("training: GOMAXPROCS restored", "gomaxprocs", base)
	}
	baseProcs.Store(0)
}
