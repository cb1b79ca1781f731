package testwait

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// deadlineTB is a testing.TB with the deadline given.
type deadlineTB struct {
	testing.TB
	at time.Time
}

func (d deadlineTB) Deadline() (time.Time, bool) { return d.at, true }

// TestGuard: the channel is open while the deadline is far, and closes
// once it has passed (a deadline already past closes it at once).
func TestGuard(t *testing.T) {
	for _, c := range []struct {
		name     string
		at       time.Time
		wantOpen bool
	}{
		{"deadline in an hour", time.Now().Add(time.Hour), true},
		{"deadline passed", time.Now().Add(-time.Second), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := Guard(deadlineTB{TB: t, at: c.at})
			if !c.wantOpen {
				<-g // closes at once; a guard that never closed would hang here
			}
			open := true
			select {
			case <-g:
				open = false
			default:
			}
			if diff := cmp.Diff(c.wantOpen, open); diff != "" {
				t.Errorf("open (-want +got):\n%s", diff)
			}
		})
	}
}
