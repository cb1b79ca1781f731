//go:build mpi

package mpitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// netnsEnv names the network namespace Run starts mpirun in.
const netnsEnv = "TOWERFLOW_MPITEST_NETNS"

var netHostsMade atomic.Int64

// NetHosts makes n hosts for a job of Run, one rank per host, whose MPI
// traffic crosses real TCP links: each host is a network namespace with
// its own address, 10.77.0.1 to 10.77.0.n, its interface eth0 a veth pair
// to a bridge in a namespace of its own. It returns the environment to
// give Run: mpirun runs in the first host, starts each other host's
// daemon through an rsh agent that enters the host's namespace (ip netns
// exec), and MPI's traffic (btl tcp, self: no shared memory) and mpirun's
// own (oob) go over 10.77.0.0/24. The namespaces are deleted when the test
// ends; the subnet is private to them. NetHosts needs root and ip
// (iproute2): without them it skips t, or fails it when CI=true.
func NetHosts(t *testing.T, n int) (env []string) {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		unavailable(t, "mpitest: network namespaces: %v (Debian: apt-get install iproute2)", err)
	}
	prefix := fmt.Sprintf("tfmpi-%d-%d", os.Getpid(), netHostsMade.Add(1))
	sw := prefix + "-sw"
	if out, err := exec.Command("ip", "netns", "add", sw).CombinedOutput(); err != nil {
		unavailable(t, "mpitest: cannot make a network namespace: ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", sw).Run() })
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("mpitest: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("-n", sw, "link", "add", "br0", "type", "bridge")
	ip("-n", sw, "link", "set", "br0", "up")
	var hostfile, agent strings.Builder
	agent.WriteString("#!/bin/sh\n# mpirun's rsh agent: [options] host command: runs command in host's network namespace.\n" +
		"while [ $# -gt 0 ]; do case \"$1\" in -*) shift ;; *) break ;; esac; done\nhost=$1; shift\ncase $host in\n")
	var first string
	for i := 1; i <= n; i++ {
		ns, addr := fmt.Sprintf("%s-h%d", prefix, i), fmt.Sprintf("10.77.0.%d", i)
		ip("netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		port := fmt.Sprintf("p%d", i)
		ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", sw)
		ip("-n", sw, "link", "set", port, "master", "br0", "up")
		ip("-n", ns, "addr", "add", addr+"/24", "dev", "eth0")
		ip("-n", ns, "link", "set", "eth0", "up")
		ip("-n", ns, "link", "set", "lo", "up")
		fmt.Fprintf(&hostfile, "%s slots=1\n", addr)
		// Each host has a name of its own too (a UTS namespace): two
		// daemons with the same name share an OpenMPI session directory
		// in /tmp, where both write their hwloc topology file, and one
		// may crash.
		fmt.Fprintf(&agent, "%s) exec ip netns exec %s unshare --uts sh -c 'hostname %s && eval \"$0\"' \"$*\" ;;\n", addr, ns, fmt.Sprintf("tfmpi-h%d", i))
		if i == 1 {
			first = ns
		}
	}
	agent.WriteString("esac\necho \"mpitest rsh agent: unknown host $host\" >&2\nexit 1\n")
	dir := t.TempDir()
	hosts, rsh := filepath.Join(dir, "hosts"), filepath.Join(dir, "rsh")
	if err := os.WriteFile(hosts, []byte(hostfile.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rsh, []byte(agent.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{
		netnsEnv + "=" + first,
		"OMPI_MCA_orte_default_hostfile=" + hosts,
		"OMPI_MCA_plm_rsh_agent=" + rsh,
		"OMPI_MCA_oob_tcp_if_include=10.77.0.0/24",
		"OMPI_MCA_btl=self,tcp",
		"OMPI_MCA_btl_tcp_if_include=10.77.0.0/24",
	}
}

// unavailable skips t, or fails it under CI=true, where everything a test
// needs is expected to be there.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
