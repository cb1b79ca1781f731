//go:build dnnl

package dnnl

/*
#include "conv.h"
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Share opens the forward and input gradient passes one goroutine (the
// owner) runs with RunShared to other goroutines that Help while it runs:
// each takes the next chunk of images no one has taken, until none is
// left, and the owner returns once every chunk is done. A chunk computes
// the same values on any thread, so the output does not depend on who
// helped (the kernel's gradient, whose chunks add up in order, is never
// shared). Towers that wait for one another use it: a tower that arrives
// first at a rendezvous computes part of the convolution the late one is
// in, instead of waiting.
//
// One goroutine at a time may run passes on a Share; any number may Help.
type Share struct {
	p *C.tf_share
	// gen is the generation of the owner's run in progress or last run
	// (0: none yet); job, that run's convolution and pass (the owner keeps
	// it while they stay the same). The owner stores job, then gen; a
	// helper loads gen, then job: a job newer than gen's run was stored
	// after that run closed, and the C side never finds a closed
	// generation open again, so a helper never runs chunks of one pass
	// with a workspace sized for another. (This takes Go's atomics and
	// C11's sequentially consistent ones to be one order, as they are on
	// the platforms oneDNN runs on here: x86-64 locked instructions.)
	gen atomic.Uint64
	job atomic.Pointer[shareJob]
	pin runtime.Pinner // the owner's arrays while a run is open
}

// shareJob is what a helper needs of a pass: the convolution, for the
// workspace's size.
type shareJob struct {
	c *Conv
	p Pass
}

// NewShare returns a Share; its C memory is freed with it.
func NewShare() *Share {
	p := C.tf_share_new()
	if p == nil {
		return nil // RunShared then runs unshared
	}
	s := &Share{p: p}
	runtime.AddCleanup(s, func(p *C.tf_share) { C.tf_share_free(p) }, p)
	return s
}

// RunShared is Run, with the chunks of a forward or input gradient pass
// open to Help on sh while it runs; with a nil sh, or for the kernel's
// gradient, it is Run.
func (c *Conv) RunShared(sh *Share, p Pass, in0, in1, bias, out, ws []float32) error {
	return c.runShared(sh, p, in0, in1, bias, out, ws, nil)
}

// runShared is RunShared; opened, if not nil, runs once the pass is open
// and before the owner takes a chunk (tests).
func (c *Conv) runShared(sh *Share, p Pass, in0, in1, bias, out, ws []float32, opened func()) error {
	if sh == nil || p == KernelGrad {
		return c.Run(p, in0, in1, bias, out, ws)
	}
	if err := c.check(p, in0, in1, bias, out, ws); err != nil {
		return err
	}
	b := c.bias(p, bias)
	if b != nil {
		sh.pin.Pin(&bias[0])
	}
	if j := sh.job.Load(); j == nil || j.c != c || j.p != p {
		sh.job.Store(&shareJob{c: c, p: p})
	}
	gen := sh.gen.Load() + 1
	sh.gen.Store(gen)
	// The C side keeps the arrays' addresses in sh for the helpers' calls
	// until finish, which forgets them before it returns: pinned meanwhile.
	for _, a := range [][]float32{in0, in1, out} {
		sh.pin.Pin(&a[0])
	}
	defer sh.pin.Unpin()
	C.tf_share_open(c.c, C.int(p), ptr(in0), ptr(in1), b, ptr(out), sh.p, C.ulong(gen))
	finished := false
	if opened != nil {
		defer func() {
			if !finished { // opened did not return: close the pass all the same
				C.tf_share_finish(sh.p, unsafe.Pointer(&ws[0]), new(*C.char))
			}
		}()
		opened()
	}
	var step *C.char
	s := C.tf_share_finish(sh.p, unsafe.Pointer(&ws[0]), &step)
	finished = true
	runtime.KeepAlive(sh)
	return c.failed(p, s, step)
}

// failChunk makes chunk k of sh's later passes fail instead of running,
// on whichever goroutine takes it; -1: none (tests; only between the
// owner's runs).
func (sh *Share) failChunk(k int) { C.tf_share_fail(sh.p, C.long(k)) }

// Help runs chunks of the pass sh's owner is running, if it has chunks no
// one has taken, in a workspace from borrow (of n float32s), handed back
// to giveBack; it reports whether it took any. A chunk that fails is the
// owner's error. Help never blocks on the owner: it returns once no chunk
// is left to take.
func (sh *Share) Help(borrow func(n int) []float32, giveBack func([]float32)) bool {
	gen := sh.gen.Load()
	j := sh.job.Load()
	if gen == 0 || j == nil || C.tf_share_pending(sh.p, C.ulong(gen)) == 0 {
		return false
	}
	ws := borrow(j.c.Workspace(j.p))
	defer giveBack(ws)
	ran := C.tf_conv_help(sh.p, C.ulong(gen), unsafe.Pointer(&ws[0]))
	runtime.KeepAlive(sh)
	return ran > 0
}
