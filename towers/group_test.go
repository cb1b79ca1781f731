package towers_test

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/testwait"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/towers"
)

// TestGroupIdle: a tower waiting in AllSum calls its idle work until the
// work reports there is no more; the tower that arrives last calls none;
// both get the sum. The other tower arrives only once the first has had
// all its idle calls (or, were they never to come, a little before the
// test's deadline), so the count is exact.
func TestGroupIdle(t *testing.T) {
	for _, c := range []struct {
		name  string
		work  int // idle calls that report work done
		wantN []int
	}{
		{"no work", 0, []int{1, 0}},
		{"three pieces", 3, []int{4, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			guard := testwait.Guard(t)
			s0 := towers.NewScope(0, 2, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil)
			g := s0.Group("g")
			calls := make([]int, 2)
			done := make(chan struct{}) // closed by tower 0's last idle call
			for i := range 2 {
				err := g.SetIdle(i, func() bool {
					calls[i]++
					if calls[i] > c.work {
						if i == 0 {
							close(done)
						}
						return false
					}
					return true
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			meet(t, g, done, guard)
			if diff := cmp.Diff(c.wantN, calls); diff != "" {
				t.Errorf("idle calls per tower (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("idle panics", func(t *testing.T) {
		// The panic comes back from AllSum with the group usable: after a
		// Reset, a round sums.
		s0 := towers.NewScope(0, 2, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil)
		g := s0.Group("g")
		if err := g.SetIdle(0, func() bool { panic("idle broke") }); err != nil {
			t.Fatal(err)
		}
		got := func() (r any) {
			defer func() { r = recover() }()
			_, _ = g.AllSum(0, []float64{1})
			return nil
		}()
		if diff := cmp.Diff(any("idle broke"), got); diff != "" {
			t.Fatalf("recovered (-want +got):\n%s", diff)
		}
		if err := g.SetIdle(0, nil); err != nil {
			t.Fatal(err)
		}
		g.Reset()
		sums := make([][]float64, 2)
		var wg sync.WaitGroup
		wg.Go(func() { sums[0], _ = g.AllSum(0, []float64{1}) })
		sums[1], _ = g.AllSum(1, []float64{2})
		wg.Wait()
		if diff := cmp.Diff([][]float64{{3}, {3}}, sums); diff != "" {
			t.Errorf("sums after the panic (-want +got):\n%s", diff)
		}
	})
	t.Run("bad tower", func(t *testing.T) {
		s0 := towers.NewScope(0, 2, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil)
		wanterr.Mentions(t, s0.Group("g").SetIdle(2, func() bool { return false }), `group "g"`, "tower 2 of 2")
	})
}

// meet has tower 0 hand 1 in to g and wait, and tower 1 hand 2 in once
// arrive is closed (or guard, a little before the test's deadline), and
// checks that both get 3.
func meet(t *testing.T, g *towers.Group, arrive, guard <-chan struct{}) {
	t.Helper()
	sums := make([][]float64, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { sums[0], errs[0] = g.AllSum(0, []float64{1}) })
	select {
	case <-arrive:
	case <-guard:
	}
	sums[1], errs[1] = g.AllSum(1, []float64{2})
	wg.Wait()
	if diff := cmp.Diff([]error{nil, nil}, errs); diff != "" {
		t.Fatalf("errors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]float64{{3}, {3}}, sums); diff != "" {
		t.Errorf("sums (-want +got):\n%s", diff)
	}
}
