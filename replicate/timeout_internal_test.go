package replicate

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/collective"
)

// TestPeerTimeoutDefault: a zero Config.PeerTimeout bounds a phase of
// collectives by DefaultPeerTimeout, a negative one does not bound it, a
// positive one by itself.
func TestPeerTimeoutDefault(t *testing.T) {
	for _, tc := range []struct {
		set  time.Duration
		want time.Duration // 0: no deadline
	}{
		{0, DefaultPeerTimeout},
		{-1, 0},
		{3 * time.Second, 3 * time.Second},
	} {
		x := newAcross(Config{Processes: collective.Local(2)[0], PeerTimeout: tc.set})
		before := time.Now()
		ctx, cancel := x.bound(context.Background())
		deadline, ok := ctx.Deadline()
		cancel()
		got := time.Duration(0)
		if ok {
			got = deadline.Sub(before).Round(time.Second)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("PeerTimeout %v: the phase's deadline is (-want +got) away:\n%s", tc.set, d)
		}
	}
}
