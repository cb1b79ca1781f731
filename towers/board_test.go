package towers_test

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/testwait"
	"github.com/towerflow/towerflow/towers"
)

// pieces is a Helper with left pieces of work: each Help runs one, noting
// it in log, and done is closed once the last is taken.
type pieces struct {
	mu   sync.Mutex
	left int
	log  *[]string
	done chan struct{}
}

func (p *pieces) Help() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left == 0 {
		return false
	}
	p.left--
	*p.log = append(*p.log, "help")
	if p.left == 0 {
		close(p.done)
	}
	return true
}

// TestWaitingTowerHelps: a tower waiting in AllSum, with its own idle work
// done first, runs the work another tower of the build has posted on the
// board, piece by piece, until none is left; the tower that posted arrives
// once every piece is taken (or, were they never to be, a little before the
// test's deadline), so the count is exact. Neither work withdrawn nor a
// tower's own is helped with.
func TestWaitingTowerHelps(t *testing.T) {
	for _, c := range []struct {
		name     string
		post     int // the tower that posts
		withdraw bool
		helps    bool     // tower 1 arrives once every piece is taken, else once tower 0 is out of idle work
		wantLog  []string // tower 0's idle calls and pieces helped with
	}{
		{name: "other tower's work", post: 1, helps: true, wantLog: []string{"idle", "idle", "help", "help", "help"}},
		{name: "withdrawn", post: 1, withdraw: true, wantLog: []string{"idle", "idle"}},
		{name: "own work", post: 0, wantLog: []string{"idle", "idle"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			guard := testwait.Guard(t)
			s0 := towers.NewScope(0, 2, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil)
			s1 := towers.NewScope(1, 2, towers.CPU(1), towers.NewStore(towers.StoreConfig{}), s0)
			if s0.Board() != s1.Board() {
				t.Fatal("the towers of a build have different boards")
			}
			g := s1.Group("g")
			var log []string // written by tower 0's goroutine alone
			work := &pieces{left: 3, log: &log, done: make(chan struct{})}
			idled := make(chan struct{}) // closed once tower 0 has no idle work left
			if err := g.SetIdle(0, func() bool {
				log = append(log, "idle")
				if len(log) == 1 { // one piece of idle work
					return true
				}
				close(idled)
				return false
			}); err != nil {
				t.Fatal(err)
			}
			s1.Board().Post(c.post, &towers.Posting{Helper: work})
			if c.withdraw {
				s1.Board().Post(c.post, nil)
			}
			arrive := idled
			if c.helps {
				arrive = work.done
			}
			meet(t, g, arrive, guard)
			if diff := cmp.Diff(c.wantLog, log); diff != "" {
				t.Errorf("tower 0's idle calls and pieces helped with (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBoardPost: posting and withdrawing allocates nothing; a nil board
// and a tower out of range take posts and do nothing; a posting with no
// Helper is not helped with.
func TestBoardPost(t *testing.T) {
	s0 := towers.NewScope(0, 2, towers.CPU(0), towers.NewStore(towers.StoreConfig{}), nil)
	b := s0.Board()
	p1, p2 := &towers.Posting{Helper: &pieces{log: new([]string)}}, &towers.Posting{Helper: &pieces{log: new([]string)}}
	if n := testing.AllocsPerRun(100, func() {
		b.Post(0, p1)
		b.Post(0, p2)
		b.Post(0, nil)
	}); n != 0 {
		t.Errorf("posting and withdrawing: %v allocations, want 0", n)
	}
	var none *towers.Board
	none.Post(0, p1)
	b.Post(2, p1)
	b.Post(-1, p1)
	b.Post(1, &towers.Posting{})
	now := make(chan struct{})
	close(now)
	meet(t, s0.Group("g"), now, now)
}
