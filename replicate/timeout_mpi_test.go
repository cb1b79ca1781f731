//go:build mpi

package replicate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/mpitest"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// timeoutResult is what rank 0 of TestMPIStoppedRankTimesOut reports.
type timeoutResult struct {
	Err        string
	Timeout    time.Duration // the PeerError's; -1 for another error
	Rank       int           // the PeerError's
	IsDeadline bool          // errors.Is(err, context.DeadlineExceeded)
	Killed     string        // what killing the stopped rank gave
}

// TestMPIStoppedRankTimesOut: under mpirun, rank 1 stops itself (SIGSTOP)
// after the start's sync of variables; rank 0, in its first training step,
// stops once Config.PeerTimeout (1 s) has passed, with a PeerError that
// says so, instead of waiting for ever. Rank 0 then kills the stopped rank,
// and exits non-zero, as a program whose group broke should.
func TestMPIStoppedRankTimesOut(t *testing.T) {
	pidFile := func() string { return filepath.Join(mpitest.OutDir(), "stopped.pid") }
	if mpitest.Child() {
		c, err := collective.MPI()
		if err != nil {
			t.Fatal(err)
		}
		cfg := replicate.Config{Devices: towers.CPUs(1), Optimizer: optimizers.SGD(0.1), Processes: c, PeerTimeout: time.Second}
		e, err := replicate.NewEngine(replicate.ModelFn(constModel, cfg), replicate.EngineConfig{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		e.Open()
		if c.Rank() == 1 {
			// Written before rank 0 can finish the sync with this rank.
			if err := os.WriteFile(pidFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
				t.Fatal(err)
			}
			_ = e.SyncFromRoot(ctx)
			// mpirun's daemon may continue a stopped rank (SIGCONT): it
			// stops again, until rank 0 kills it.
			for {
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			} // continued: never, unless by hand
		}
		// A sync that times out (a loaded machine) is a PeerError too.
		err = e.SyncFromRoot(ctx)
		if err == nil {
			batch := sharding.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2)}, Labels: map[string]*tensor.Dense{"y": column(3, 4)}}
			_, err = e.TrainStep(ctx, batch, replicate.StepHooks{})
		}
		res := timeoutResult{Err: errString(err), Timeout: -1, Rank: -2, IsDeadline: errors.Is(err, context.DeadlineExceeded)}
		if pe, ok := errors.AsType[*replicate.PeerError](err); ok {
			res.Timeout, res.Rank = pe.Timeout, pe.Rank
		}
		res.Killed = "no pid"
		if b, err := os.ReadFile(pidFile()); err == nil {
			pid, _ := strconv.Atoi(string(b))
			res.Killed = errString(syscall.Kill(pid, syscall.SIGKILL))
		}
		if err := mpitest.WriteResult(0, res); err != nil {
			t.Fatal(err)
		}
		os.Exit(3)
	}
	dir, out, err := mpitest.RunErr(t, 2)
	t.Logf("mpirun's output:\n%s", out)
	if _, ok := errors.AsType[*exec.ExitError](err); !ok || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the job ended with %v, want a non-zero exit", err)
	}
	got := mpitest.ReadResults[timeoutResult](t, dir, 1)[0]
	t.Logf("rank 0's error: %s", got.Err)
	got.Err = ""
	if d := cmp.Diff(timeoutResult{Timeout: time.Second, Rank: -1, IsDeadline: true}, got); d != "" {
		t.Errorf("rank 0 (-want +got):\n%s", d)
	}
	b, err := os.ReadFile(filepath.Join(dir, "stopped.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// pid (comm) state ...: gone, or a zombie waiting for its parent.
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] != "Z" {
			t.Errorf("the stopped rank, pid %d, is still there, state %s", pid, f[0])
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestMPISilentNetworkTimesOut: under mpirun, ranks on hosts of their own
// (network namespaces); after the start's sync of variables rank 1 takes
// its host's link down. Both ranks, each waiting for the other, stop once
// Config.PeerTimeout (1 s) has passed, with a PeerError that says so;
// rank 1 then brings its link back up, so that mpirun can end the job.
func TestMPISilentNetworkTimesOut(t *testing.T) {
	if mpitest.Child() {
		c, err := collective.MPI()
		if err != nil {
			t.Fatal(err)
		}
		cfg := replicate.Config{Devices: towers.CPUs(1), Optimizer: optimizers.SGD(0.1), Processes: c, PeerTimeout: time.Second}
		e, err := replicate.NewEngine(replicate.ModelFn(constModel, cfg), replicate.EngineConfig{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		e.Open()
		link := func(state string) {
			if out, err := exec.Command("ip", "link", "set", "eth0", state).CombinedOutput(); err != nil {
				t.Fatalf("ip link set eth0 %s: %v: %s", state, err, out)
			}
		}
		// A sync that times out (a loaded machine) is a PeerError too.
		err = e.SyncFromRoot(ctx)
		if err == nil {
			if c.Rank() == 1 {
				link("down")
			}
			batch := sharding.Batch{Features: map[string]*tensor.Dense{"x": column(1, 2)}, Labels: map[string]*tensor.Dense{"y": column(3, 4)}}
			_, err = e.TrainStep(ctx, batch, replicate.StepHooks{})
		}
		res := timeoutResult{Err: errString(err), Timeout: -1, Rank: -2, IsDeadline: errors.Is(err, context.DeadlineExceeded)}
		if pe, ok := errors.AsType[*replicate.PeerError](err); ok {
			res.Timeout, res.Rank = pe.Timeout, pe.Rank
		}
		if err := mpitest.WriteResult(c.Rank(), res); err != nil {
			t.Fatal(err)
		}
		if c.Rank() == 1 {
			link("up")
		}
		os.Exit(3)
	}
	dir, out, err := mpitest.RunErr(t, 2, mpitest.NetHosts(t, 2)...)
	t.Logf("mpirun's output:\n%s", out)
	if _, ok := errors.AsType[*exec.ExitError](err); !ok || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the job ended with %v, want a non-zero exit", err)
	}
	for r, got := range mpitest.ReadResults[timeoutResult](t, dir, 2) {
		t.Logf("rank %d's error: %s", r, got.Err)
		got.Err = ""
		if d := cmp.Diff(timeoutResult{Timeout: time.Second, Rank: -1, IsDeadline: true}, got); d != "" {
			t.Errorf("rank %d (-want +got):\n%s", r, d)
		}
	}
}
