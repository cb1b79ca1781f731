//go:build mpi

package mpitest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type hello struct {
	Rank, Size int
	Env        string
}

func TestRunRunsTheTestAsRanks(t *testing.T) {
	for _, np := range []int{1, 3} {
		t.Run("np="+strconv.Itoa(np), func(t *testing.T) {
			if Child() {
				size, _ := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_SIZE"))
				if err := WriteResult(Rank(), hello{Rank(), size, os.Getenv("MPITEST_HELLO")}); err != nil {
					t.Fatal(err)
				}
				return
			}
			dir := Run(t, np, "MPITEST_HELLO=hi there")
			var want []hello
			for r := range np {
				want = append(want, hello{r, np, "hi there"})
			}
			if diff := cmp.Diff(want, ReadResults[hello](t, dir, np)); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunErrReportsARankThatFails(t *testing.T) {
	if Child() {
		if Rank() == 1 {
			os.Exit(3)
		}
		return
	}
	_, out, err := RunErr(t, 2)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("RunErr's error is %v, want a non-zero exit; output:\n%s", err, out)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RunErr's error %v says it ran out of time", err)
	}
	if !strings.Contains(string(out), "exit") {
		t.Errorf("mpirun's output does not mention the exit:\n%s", out)
	}
}

// A job that outlives Timeout is stopped, and so is whatever its ranks
// started in process groups of their own.
func TestRunErrStopsAJobAtTimeout(t *testing.T) {
	if Child() {
		stray := exec.Command("sleep", "3600")
		stray.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := stray.Start(); err != nil {
			t.Fatal(err)
		}
		if err := WriteResult(Rank(), []int{os.Getpid(), stray.Process.Pid}); err != nil {
			t.Fatal(err)
		}
		// Become a rank that Go's -test.timeout cannot end.
		sleep, err := exec.LookPath("sleep")
		if err != nil {
			t.Fatal(err)
		}
		t.Fatal(syscall.Exec(sleep, []string{"sleep", "3600"}, os.Environ()))
	}
	defer func(d time.Duration) { Timeout = d }(Timeout)
	Timeout = 8 * time.Second
	start := time.Now()
	dir, out, err := RunErr(t, 2)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RunErr's error is %v, want one wrapping context.DeadlineExceeded; output:\n%s", err, out)
	}
	if d := time.Since(start); d > Timeout+20*time.Second {
		t.Errorf("RunErr took %v with a timeout of %v", d, Timeout)
	}
	for r, pids := range ReadResults[[]int](t, dir, 2) {
		for _, pid := range pids {
			if alive(pid) {
				t.Errorf("rank %d's process %d still runs", r, pid)
			}
		}
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(string(b[i+1:]), " Z")
}

func TestRunPatternMatchesOnlyTheTest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		match     []string
		dontMatch []string
	}{
		{"TestA", []string{"TestA"}, []string{"TestAB", "XTestA"}},
		{"TestA/np=2", []string{"TestA/np=2"}, []string{"TestA/np=20", "TestA/xnp=2"}},
		{"TestA/a.b(c)#01", []string{"TestA/a.b(c)#01"}, []string{"TestA/aXb(c)#01"}},
	} {
		pattern := runPattern(tc.name)
		// -test.run matches each /-separated element against the test's.
		elems := strings.Split(pattern, "/")
		matches := func(name string) bool {
			parts := strings.Split(name, "/")
			if len(parts) != len(elems) {
				return false
			}
			for i, e := range elems {
				if !regexp.MustCompile(e).MatchString(parts[i]) {
					return false
				}
			}
			return true
		}
		for _, n := range tc.match {
			if !matches(n) {
				t.Errorf("pattern %q does not match %q", pattern, n)
			}
		}
		for _, n := range tc.dontMatch {
			if matches(n) {
				t.Errorf("pattern %q matches %q", pattern, n)
			}
		}
	}
}

type hostResult struct {
	Netns    string // /proc/self/ns/net's link
	Addrs    []string
	Hostname string
}

func TestNetHostsPutsARankOnEachHost(t *testing.T) {
	if Child() {
		ns, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		res := hostResult{Netns: ns}
		if res.Hostname, err = os.Hostname(); err != nil {
			t.Fatal(err)
		}
		if eth, err := net.InterfaceByName("eth0"); err == nil {
			addrs, _ := eth.Addrs()
			for _, a := range addrs {
				if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil {
					res.Addrs = append(res.Addrs, ip.String())
				}
			}
		}
		if err := WriteResult(Rank(), res); err != nil {
			t.Fatal(err)
		}
		return
	}
	const np = 3
	dir := Run(t, np, NetHosts(t, np)...)
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{self: true}
	names := map[string]bool{}
	for r, res := range ReadResults[hostResult](t, dir, np) {
		if names[res.Hostname] {
			t.Errorf("rank %d's host is named %s, as another rank's", r, res.Hostname)
		}
		names[res.Hostname] = true
		if want := []string{fmt.Sprintf("10.77.0.%d/24", r+1)}; !cmp.Equal(want, res.Addrs) {
			t.Errorf("rank %d has eth0 addresses %v, want %v", r, res.Addrs, want)
		}
		if seen[res.Netns] {
			t.Errorf("rank %d runs in network namespace %s, which another rank or the test has", r, res.Netns)
		}
		seen[res.Netns] = true
	}
}
