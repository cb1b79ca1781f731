//go:build mpi

package collective

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/mpitest"
)

// netResult is what a rank of TestMPIOverTCPBetweenNetworkNamespaces
// reports.
type netResult struct {
	Small      []float64 // an all-reduce of 5
	Mismatches int       // elements of an all-reduce of 1 MiB that differ from the sum
	SentBytes  int64     // what the rank's eth0 sent during the all-reduces
	Bcast      []float64 // a broadcast from the last rank
}

// Ranks on hosts of their own (network namespaces, mpitest.NetHosts) sum
// and broadcast over TCP between the hosts.
func TestMPIOverTCPBetweenNetworkNamespaces(t *testing.T) {
	const np, n = 3, 1 << 17
	if mpitest.Child() {
		c, err := MPI()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		before := ethSent(t)
		var res netResult
		if res.Small, err = allReduce64(5)(ctx, c); err != nil {
			t.Fatal(err)
		}
		big, err := allReduce64(n)(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range rankSum(np, n) {
			if big[i] != x {
				res.Mismatches++
			}
		}
		if res.Bcast, err = broadcast(-1, 1000)(ctx, c); err != nil {
			t.Fatal(err)
		}
		res.SentBytes = ethSent(t) - before
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mpitest.WriteResult(c.Rank(), res); err != nil {
			t.Fatal(err)
		}
		return
	}
	dir := mpitest.Run(t, np, mpitest.NetHosts(t, np)...)
	for r, res := range mpitest.ReadResults[netResult](t, dir, np) {
		if diff := cmp.Diff(rankSum(np, 5), res.Small); diff != "" {
			t.Errorf("rank %d: all-reduce of 5 (-want +got):\n%s", r, diff)
		}
		if res.Mismatches != 0 {
			t.Errorf("rank %d: %d of the %d sums of the all-reduce of 1 MiB are wrong", r, res.Mismatches, n)
		}
		if diff := cmp.Diff(wantBroadcast(-1, 1000)(np, r), res.Bcast); diff != "" {
			t.Errorf("rank %d: broadcast (-want +got):\n%s", r, diff)
		}
		// Summing n float64 among np ranks, each sends at least its
		// share of the buffer twice (reduce-scatter, all-gather) less one
		// share: 8n(np-1)/np bytes, which is 0.67 MiB here.
		if min := int64(8 * n * (np - 1) / np); res.SentBytes < min {
			t.Errorf("rank %d sent %d bytes on eth0, want at least %d", r, res.SentBytes, min)
		}
	}
}

// ethSent is the bytes this network namespace's eth0 has sent, from
// /proc/net/dev.
func ethSent(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, stats, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != "eth0" {
			continue
		}
		f := strings.Fields(stats) // receive: 8 fields, then transmit bytes
		if len(f) < 9 {
			break
		}
		n, err := strconv.ParseInt(f[8], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Fatal("no eth0 in /proc/net/dev")
	return 0
}
