package towers

import "sync/atomic"

// Helper is work a tower is running that the build's other towers may
// join while they wait for it in a Group (Board.Post): a convolution's
// chunks of images, say.
type Helper interface {
	// Help runs pieces of the work no one has taken yet, if any are left,
	// on the calling goroutine, and reports whether it ran any. Its result
	// must not depend on which tower runs which piece, and a failure is
	// the posting tower's to return: Help must not panic, and it must not
	// wait for the posting tower.
	Help() bool
}

// Sharing is implemented by ops (gorgonia.Op) that can post their runs on
// their build's Board. The engine calls ShareOn on a tower's ops before
// the tower runs, when the build has several towers that meet in groups;
// from then on the op posts on b as tower while it runs.
type Sharing interface {
	ShareOn(b *Board, tower int)
}

// Board holds, for each tower of a build, the work it is running that the
// others may join (Helper). A tower that waits in a Group, with no idle
// work of its own left (SetIdle), helps the towers it waits for with what
// they have posted, so that it computes part of a late tower's work
// instead of waiting for all of it.
type Board struct {
	posted []atomic.Pointer[Posting]
}

// Posting is a Helper as a tower posts it on a Board. An op keeps its own
// and posts its address, so that posting allocates nothing.
type Posting struct {
	Helper Helper
}

// Board returns the build's board: the same *Board on every tower of the
// build (tower 0 makes it).
func (s *Scope) Board() *Board {
	first := s.tower0()
	if first.board == nil {
		first.board = &Board{posted: make([]atomic.Pointer[Posting], first.count)}
	}
	return first.board
}

// Post makes p tower's posted work, until the next Post; nil withdraws it.
// A tower posts work before running it and withdraws it after. A nil
// board, or a tower not of the build, takes the post and does nothing.
func (b *Board) Post(tower int, p *Posting) {
	if b == nil || tower < 0 || tower >= len(b.posted) {
		return
	}
	b.posted[tower].Store(p)
}

// help runs a piece of the work the towers other than tower have posted,
// and reports whether it ran any.
func (b *Board) help(tower int) bool {
	if b == nil {
		return false
	}
	for i := range b.posted {
		if i == tower {
			continue
		}
		if p := b.posted[i].Load(); p != nil && p.Helper != nil && p.Helper.Help() {
			return true
		}
	}
	return false
}
