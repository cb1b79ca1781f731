package tower

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/testwait"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/towers"
)

// movableOp is an fnOp the program may defer (towers.Movable).
type movableOp struct{ fnOp }

func (movableOp) Movable() bool { return true }

// TestSinksFillGroupWaits: with two towers meeting in a group, the sinks
// (movable ops only sinks read) are put off; tower 0, arriving first at the
// group, runs them while it waits, and tower 1, which arrives only once
// tower 0 has run them, runs its own after the meeting, at the end. The
// values are those of the ops run in order. A sink that fails or panics
// while run in a wait fails its tower's run after the op that waited,
// naming the tower, and the other tower does not hang.
func TestSinksFillGroupWaits(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name       string
		sink       func(G.Value) (G.Value, error) // tower 0's first sink, after logging
		wantEvents [][]string
		wantErr    []string // tower 0's run; nil: no error
		panics     bool
	}{
		{
			name:       "ok",
			wantEvents: [][]string{{"arrive", "sink", "sink2", "summed"}, {"arrive", "summed", "sink", "sink2"}},
		},
		{
			name:       "error",
			sink:       func(G.Value) (G.Value, error) { return nil, boom },
			wantEvents: [][]string{{"arrive", "sink", "summed"}, {"arrive", "summed", "sink", "sink2"}},
			wantErr:    []string{"tower 0", "sink", "boom"},
		},
		{
			name:       "panic",
			sink:       func(G.Value) (G.Value, error) { panic("sink broke") },
			wantEvents: [][]string{{"arrive", "sink", "summed"}, {"arrive", "summed", "sink", "sink2"}},
			wantErr:    []string{"tower 0", "run", "sink broke"},
			panics:     true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			guard := testwait.Guard(t)
			store := towers.NewStore(towers.StoreConfig{})
			s0 := towers.NewScope(0, 2, towers.CPU(0), store, nil)
			scopes := []*towers.Scope{s0, towers.NewScope(1, 2, towers.CPU(1), store, s0)}
			group := s0.Group("meet")
			gate := make(chan struct{}) // closed once tower 0 ran the sink tower 1 waits for
			var once sync.Once
			open := func() { once.Do(func() { close(gate) }) }
			events := make([][]string, 2)
			var ts []*Tower
			var sink2s []*G.Node
			for i, s := range scopes {
				tw := New(s, nil)
				log := func(e string) { events[i] = append(events[i], e) }
				x := input(t, tw, "x", 2)
				double := func(v G.Value) (G.Value, error) {
					d := v.Data().([]float64)
					return tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{2 * d[0], 2 * d[1]})), nil
				}
				// Made first, so that program order puts the sinks before
				// the meeting.
				sink := G.Must(G.ApplyOp(movableOp{fnOp{name: "sink", do: func(v G.Value) (G.Value, error) {
					log("sink")
					if i == 0 && c.sink != nil {
						open()
						return c.sink(v)
					}
					return double(v)
				}}}, x))
				sink2 := G.Must(G.ApplyOp(movableOp{fnOp{name: "sink2", do: func(v G.Value) (G.Value, error) {
					log("sink2")
					if i == 0 {
						open()
					}
					return double(v)
				}}}, sink))
				meet := G.Must(G.ApplyOp(fnOp{name: "meet", do: func(v G.Value) (G.Value, error) {
					if i == 1 {
						select {
						case <-gate:
						case <-guard:
						}
					}
					log("arrive")
					sum, err := group.AllSum(i, []float64{1})
					if err != nil {
						return nil, err
					}
					log("summed")
					return tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{sum[0], sum[0]})), nil
				}}, x))
				for _, n := range []*G.Node{sink2, meet} {
					if err := tw.Watch(n); err != nil {
						t.Fatal(err)
					}
				}
				if err := tw.Compile(); err != nil {
					t.Fatal(err)
				}
				if err := tw.Feed("x", tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, 2}))); err != nil {
					t.Fatal(err)
				}
				ts = append(ts, tw)
				sink2s = append(sink2s, sink2)
			}
			errs := make([]error, 2)
			err := RunAll(context.Background(), ts, func(tw *Tower) error {
				errs[tw.Index()] = tw.Run()
				return errs[tw.Index()]
			})
			if diff := cmp.Diff(c.wantEvents, events); diff != "" {
				t.Errorf("events per tower (-want +got):\n%s", diff)
			}
			if c.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				var got [][]float64
				for i, tw := range ts {
					v, err := tw.Value(sink2s[i])
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, v.Data().([]float64))
				}
				if diff := cmp.Diff([][]float64{{4, 8}, {4, 8}}, got); diff != "" {
					t.Errorf("sink2's values (-want +got):\n%s", diff)
				}
				return
			}
			wanterr.Mentions(t, errs[0], c.wantErr...)
			var pe *PanicError
			if got := errors.As(errs[0], &pe); got != c.panics {
				t.Errorf("tower 0's error is a *PanicError: %v, want %v", got, c.panics)
			}
			if c.panics && pe != nil && len(pe.Stack) == 0 {
				t.Error("the *PanicError has no stack")
			}
			if errs[1] != nil {
				t.Errorf("tower 1: %v", errs[1])
			}
		})
	}
}

// sharingOp is an fnOp that notes the board and tower it is given
// (towers.Sharing); build is its build's board.
type sharingOp struct {
	fnOp
	build *towers.Board
	got   *[]shared
}

// shared is one ShareOn call: whether the board was the build's, and the
// tower.
type shared struct {
	Build bool
	Tower int
}

func (o sharingOp) ShareOn(b *towers.Board, tower int) {
	*o.got = append(*o.got, shared{Build: b != nil && b == o.build, Tower: tower})
}

// TestOpsShareOnTheBuildsBoard: compiling the towers of a build whose
// towers meet in a group hands each op that can share its runs
// (towers.Sharing) the build's board and its tower's index; a build of
// one tower, or one whose towers never meet, has no one to share with.
func TestOpsShareOnTheBuildsBoard(t *testing.T) {
	for _, c := range []struct {
		name   string
		towers int
		meet   bool
		want   []shared
	}{
		{"two towers meeting", 2, true, []shared{{true, 0}, {true, 1}}},
		{"two towers not meeting", 2, false, nil},
		{"one tower", 1, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := towers.NewStore(towers.StoreConfig{})
			var scopes []*towers.Scope
			for i := range c.towers {
				var first *towers.Scope
				if i > 0 {
					first = scopes[0]
				}
				scopes = append(scopes, towers.NewScope(i, c.towers, towers.CPU(i), store, first))
			}
			var got []shared
			for i, s := range scopes {
				tw := New(s, nil)
				x := input(t, tw, "x", 2)
				y := G.Must(G.ApplyOp(sharingOp{fnOp: fnOp{name: "conv", do: func(v G.Value) (G.Value, error) { return v, nil }}, build: scopes[0].Board(), got: &got}, x))
				if c.meet {
					group := s.Group("meet")
					y = G.Must(G.ApplyOp(fnOp{name: "meet", do: func(v G.Value) (G.Value, error) {
						_, err := group.AllSum(i, []float64{1})
						return v, err
					}}, y))
				}
				if err := tw.Watch(y); err != nil {
					t.Fatal(err)
				}
				if err := tw.Compile(); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("ShareOn calls (-want +got):\n%s", diff)
			}
		})
	}
}
