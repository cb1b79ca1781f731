package parallel

import (
	"log/slog"
	"os"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// procsState is what HoldSpareProcessor changes: GOMAXPROCS and Cores.
type procsState struct{ GOMAXPROCS, Cores int }

func readProcs() procsState { return procsState{runtime.GOMAXPROCS(0), Cores()} }

// setProcs sets GOMAXPROCS to n for the test and unsets the GOMAXPROCS
// environment variable, restoring both afterwards.
func setProcs(t *testing.T, n int) {
	t.Helper()
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		t.Setenv("GOMAXPROCS", v) // restored after the test
		os.Unsetenv("GOMAXPROCS")
	}
}

func TestHoldSpareProcessor(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	raised := procsState{GOMAXPROCS: 3, Cores: 2}
	plain := procsState{GOMAXPROCS: 2, Cores: 2}
	cases := []struct {
		name   string
		towers int
		cgo    bool
		env    string // the GOMAXPROCS environment variable, if not empty
		want   procsState
	}{
		{name: "towers on every core in cgo", towers: 2, cgo: true, want: raised},
		{name: "more towers than cores", towers: 3, cgo: true, want: raised},
		{name: "a core left over", towers: 1, cgo: true, want: plain},
		{name: "Go kernels", towers: 2, cgo: false, want: plain},
		{name: "GOMAXPROCS set by the user", towers: 2, cgo: true, env: "2", want: plain},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setProcs(t, 2)
			if c.env != "" {
				t.Setenv("GOMAXPROCS", c.env)
			}
			release := HoldSpareProcessor(log, c.towers, c.cgo)
			during := readProcs()
			release()
			release() // a second call does nothing
			if diff := cmp.Diff([]procsState{c.want, plain}, []procsState{during, readProcs()}); diff != "" {
				t.Errorf("GOMAXPROCS and Cores during and after the hold (-want +got):\n%s", diff)
			}
		})
	}
}

// Two runs whose holds overlap keep the spare processor until the later
// one ends, then GOMAXPROCS is what it was before the first.
func TestHoldSpareProcessorOverlapping(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	setProcs(t, 2)
	var got []procsState
	first := HoldSpareProcessor(log, 2, true)
	got = append(got, readProcs())
	second := HoldSpareProcessor(log, 2, true)
	got = append(got, readProcs())
	first()
	first()
	got = append(got, readProcs())
	second()
	got = append(got, readProcs())
	want := []procsState{{3, 2}, {3, 2}, {3, 2}, {2, 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GOMAXPROCS and Cores after each hold and release (-want +got):\n%s", diff)
	}
}

// A GOMAXPROCS set by someone else during the hold stands after it.
func TestHoldSpareProcessorChangedMeanwhile(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	setProcs(t, 2)
	release := HoldSpareProcessor(log, 2, true)
	runtime.GOMAXPROCS(5)
	release()
	if diff := cmp.Diff(procsState{5, 5}, readProcs()); diff != "" {
		t.Errorf("GOMAXPROCS and Cores after the hold (-want +got):\n%s", diff)
	}
}

// Holds taken and released by several goroutines at once (Estimators
// training at the same time) keep GOMAXPROCS raised while any is held and
// leave it as it was after the last.
func TestHoldSpareProcessorConcurrent(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	setProcs(t, 2)
	const runs = 8
	held := make(chan procsState)
	release := make(chan struct{})
	for range runs {
		go func() {
			done := HoldSpareProcessor(log, 2, true)
			held <- readProcs()
			<-release
			done()
			held <- procsState{}
		}()
	}
	var during []procsState
	for range runs {
		during = append(during, <-held)
	}
	close(release)
	for range runs {
		<-held
	}
	want := make([]procsState, runs)
	for i := range want {
		want[i] = procsState{3, 2}
	}
	if diff := cmp.Diff(want, during); diff != "" {
		t.Errorf("GOMAXPROCS and Cores while all runs hold (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(procsState{2, 2}, readProcs()); diff != "" {
		t.Errorf("GOMAXPROCS and Cores after every release (-want +got):\n%s", diff)
	}
}
