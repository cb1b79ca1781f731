//go:build mpi

// Package mpitest runs a test's body as the ranks of an MPI job under plain
// `go test -tags mpi`: Run starts the running test binary again under
// mpirun, running only the calling test, and the test tells by Child which
// of the two it is:
//
//	func TestSum(t *testing.T) {
//		if mpitest.Child() {
//			c, err := collective.MPI() // this process is one rank
//			... // the body; a failure fails the job
//			if err := mpitest.WriteResult(c.Rank(), got); err != nil {
//				t.Fatal(err)
//			}
//			return
//		}
//		dir := mpitest.Run(t, 2)
//		results := mpitest.ReadResults[[]float64](t, dir, 2)
//		... // compare
//	}
//
// The ranks share the machine (mpirun --oversubscribe, not bound to cores);
// Timeout bounds a job, after which every process of it is killed.
// Run(t, np, NetHosts(t, np)...) puts each rank on a host of its own, a
// network namespace, so that MPI's traffic crosses TCP links.
package mpitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// outDirEnv marks Run's ranks and names their output directory.
const outDirEnv = "TOWERFLOW_MPITEST_DIR"

// Timeout is the longest a job of Run may take (less when the test's own
// deadline comes sooner); then it is stopped and the test fails.
var Timeout = 3 * time.Minute

// MCA is the OpenMPI settings Run gives every job, as OMPI_MCA_ variables
// (so that they reach ranks on other hosts too):
//
//   - btl_vader_single_copy_mechanism=none: by default ranks on one host
//     copy large messages straight from each other's memory (CMA,
//     process_vm_readv), which a container without CAP_SYS_PTRACE refuses
//     ("Read -1, expected ..., errno = 1"); through the shared-memory
//     buffers instead it works anywhere.
//   - btl=self,vader,tcp: the transports Debian's openmpi-mca-params.conf
//     leaves (it excludes openib, ofi, uct), named here so that another
//     OpenMPI build does not probe for InfiniBand and warn.
var MCA = []string{
	"OMPI_MCA_btl_vader_single_copy_mechanism=none",
	"OMPI_MCA_btl=self,vader,tcp",
}

// Child reports whether this process is one of the ranks Run started.
func Child() bool { return os.Getenv(outDirEnv) != "" }

// OutDir is the directory a rank writes its results to, the one Run
// returns; "" outside Run's ranks.
func OutDir() string { return os.Getenv(outDirEnv) }

// Rank is this process's rank in mpirun's job (OMPI_COMM_WORLD_RANK), or -1
// outside one: for a body that does not join MPI itself.
func Rank() int {
	r, err := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_RANK"))
	if err != nil {
		return -1
	}
	return r
}

// WriteResult writes v as JSON to rank's file in OutDir, for ReadResults.
func WriteResult(rank int, v any) error {
	dir := OutDir()
	if dir == "" {
		return errors.New("mpitest: WriteResult outside a rank of Run")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("mpitest: rank %d's result: %w", rank, err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".rank-%d.json.tmp", rank))
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, resultPath(dir, rank))
}

func resultPath(dir string, rank int) string {
	return filepath.Join(dir, fmt.Sprintf("rank-%d.json", rank))
}

// ReadResults reads the results ranks 0..np-1 wrote to dir with
// WriteResult, failing t when one is missing or does not decode into T.
func ReadResults[T any](t testing.TB, dir string, np int) []T {
	t.Helper()
	out := make([]T, np)
	for r := range out {
		b, err := os.ReadFile(resultPath(dir, r))
		if err != nil {
			t.Fatalf("mpitest: rank %d wrote no result: %v", r, err)
		}
		if err := json.Unmarshal(b, &out[r]); err != nil {
			t.Fatalf("mpitest: rank %d's result: %v", r, err)
		}
	}
	return out
}

// Run runs the calling test (t.Name(), subtests included) as np ranks of
// mpirun and returns the directory the ranks wrote their results to (a new
// t.TempDir). env, NAME=value, is added to the ranks' environment. It fails
// t, with mpirun's output, when the job exits non-zero or takes longer than
// Timeout.
func Run(t *testing.T, np int, env ...string) (dir string) {
	t.Helper()
	dir, out, err := RunErr(t, np, env...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("mpirun's output:\n%s", out)
	}
	return dir
}

// RunErr is Run for a job expected to fail: it returns mpirun's combined
// output and its error (an *exec.ExitError for a non-zero exit, or one
// wrapping context.DeadlineExceeded after Timeout) instead of failing t.
// It fails t only when mpirun cannot be started.
//
// mpirun runs with --oversubscribe (more ranks than cores) and --bind-to
// none: bound to one core each, as mpirun does for two ranks, every rank's
// Go runtime would take GOMAXPROCS=1, and two jobs at once would share the
// same cores. It runs in a process session of its own (setsid); after it
// exits, or when it has had SIGTERM (which it passes on to the ranks) and
// 10 s to stop after Timeout, every process left in that process session is
// killed, since mpirun puts each rank in a process group of its own.
func RunErr(t *testing.T, np int, env ...string) (dir string, output []byte, err error) {
	t.Helper()
	if Child() {
		t.Fatalf("mpitest: Run in a rank of Run (%s)", t.Name())
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Fatalf("mpitest: %v (Debian: apt-get install openmpi-bin)", err)
	}
	dir = t.TempDir()
	limit := Timeout
	if d, ok := t.Deadline(); ok {
		limit = min(limit, time.Until(d)-10*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()

	vars := append(append([]string{outDirEnv + "=" + dir}, MCA...), env...)
	args := []string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--tag-output", "-np", strconv.Itoa(np)}
	for _, v := range vars {
		name, _, _ := strings.Cut(v, "=")
		args = append(args, "-x", name)
	}
	// The ranks' own -test.timeout comes first, so that a hung rank prints
	// its goroutines before the job is killed.
	args = append(args, os.Args[0], "-test.run", runPattern(t.Name()), "-test.count=1",
		"-test.timeout", max(limit-5*time.Second, time.Second).String())
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), vars...)
	if ns := lookupEnv(cmd.Env, netnsEnv); ns != "" { // NetHosts: mpirun runs in the first host
		cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, mpirun}, args...)...)
		cmd.Env = append(os.Environ(), vars...)
	}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		killSession(cmd.Process.Pid)
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("mpitest: mpirun -np %d ran out of its %v: %w (%v)", np, limit, ctx.Err(), err)
	} else if err != nil {
		err = fmt.Errorf("mpitest: mpirun -np %d: %w", np, err)
	}
	return dir, buf.Bytes(), err
}

// lookupEnv is name's value in env, the last one given.
func lookupEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// runPattern is the -test.run pattern that matches the test named name (as
// t.Name gives it) and nothing else.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// killSession kills every process left in session sid (on Linux, where
// /proc lists them), and waits up to 5 s for them to be gone.
func killSession(sid int) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		left := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if s, state, ok := procStat(pid); ok && s == sid && state != "Z" {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				left = true
			}
		}
		if !left {
			return
		}
	}
}

// procStat reads the session id and state of process pid from
// /proc/pid/stat.
func procStat(pid int) (session int, state string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	// pid (comm) state ppid pgrp session ...; comm may hold spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return 0, "", false
	}
	s, err := strconv.Atoi(f[3])
	return s, f[0], err == nil
}
