//go:build dnnl

package dnnl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRunSharedEqualsRun: a pass run with RunShared gives Run's bits, for
// forward and input gradient passes that other goroutines help with (NCHW
// and NHWC, float32 and bfloat16, a bias and ReLU, a last chunk of the
// rest): with a helper that takes every chunk, before the owner takes any
// (deterministically, from the hook between opening the pass and taking
// chunks), and with one and three helpers that help all along, taking what
// they get. The kernel's gradient, whose chunks add up in order, no helper
// takes a chunk of.
func TestRunSharedEqualsRun(t *testing.T) {
	geoms := []struct {
		name string
		g    Geom
	}{
		{"NCHW float32", Geom{N: 13, C: 3, H: 6, W: 6, F: 4, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, OH: 6, OW: 6, Chunk: 2}},
		{"NHWC float32 bias ReLU", Geom{N: 16, C: 8, H: 5, W: 5, F: 16, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, OH: 5, OW: 5, Chunk: 1, Bias: true, ReLU: true, NHWC: true}},
		{"NHWC bfloat16 stride 2", Geom{N: 11, C: 16, H: 8, W: 8, F: 32, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, OH: 4, OW: 4, Chunk: 3, BF16: true, NHWC: true}},
		{"NCHW bfloat16", Geom{N: 9, C: 16, H: 8, W: 8, F: 16, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, OH: 8, OW: 8, Chunk: 1, BF16: true}},
	}
	for _, ge := range geoms {
		if ge.g.BF16 && !BF16() {
			t.Logf("%s: no native bfloat16 convolutions on this CPU; left out", ge.name)
			continue
		}
		c, err := Lookup(ge.g)
		if err != nil {
			t.Fatal(err)
		}
		x, k, y, b := randomArgs(ge.g, 3)
		for _, pass := range []struct {
			p        Pass
			in0, in1 []float32
			out      int
			shared   bool
		}{
			{Forward, x, k, len(y), true},
			{InputGrad, y, k, len(x), true},
			{KernelGrad, x, y, len(k), false},
		} {
			want := make([]float32, pass.out)
			if err := c.Run(pass.p, pass.in0, pass.in1, b, want, make([]float32, c.Workspace(pass.p))); err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("%s/%v/helper takes all", ge.name, pass.p), func(t *testing.T) {
				sh := NewShare()
				got := make([]float32, pass.out)
				var helped bool
				err := c.runShared(sh, pass.p, pass.in0, pass.in1, b, got, make([]float32, c.Workspace(pass.p)), func() {
					helped = sh.Help(func(n int) []float32 { return make([]float32, n) }, func([]float32) {})
				})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("(-Run +RunShared):\n%s", diff)
				}
				if helped != pass.shared {
					t.Errorf("the helper took chunks: %v, want %v", helped, pass.shared)
				}
			})
			for _, helpers := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/%v/%d helpers", ge.name, pass.p, helpers), func(t *testing.T) {
					helped := runShared(t, c, pass.p, pass.in0, pass.in1, b, want, helpers)
					if !pass.shared && helped != 0 {
						t.Errorf("helpers took chunks in %d runs of a pass that is not shared", helped)
					}
					t.Logf("helped in %d of 20 runs", helped)
				})
			}
		}
	}
}

// runShared runs pass p with RunShared 20 times while helpers goroutines
// Help, checking each run's output against want; it returns the runs
// helpers took chunks in.
func runShared(t *testing.T, c *Conv, p Pass, in0, in1, b, want []float32, helpers int) int {
	t.Helper()
	sh := NewShare()
	ws := make([]float32, c.Workspace(p))
	borrow := func(n int) []float32 { return make([]float32, n) }
	giveBack := func([]float32) {}
	helped := 0
	for run := range 20 {
		got := make([]float32, len(want))
		var stop atomic.Bool
		var ran atomic.Int64
		var wg sync.WaitGroup
		for range helpers {
			wg.Go(func() {
				for !stop.Load() {
					if sh.Help(borrow, giveBack) {
						ran.Add(1)
					}
				}
			})
		}
		err := c.RunShared(sh, p, in0, in1, b, got, ws)
		stop.Store(true)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("run %d, helped %d times: RunShared (-Run +RunShared):\n%s", run, ran.Load(), diff)
		}
		if ran.Load() > 0 {
			helped++
		}
	}
	return helped
}

// TestHelpWithNothingOpen: Help on a Share with no pass running, before
// any run (with or without a job the owner is about to open, generation 0)
// and after one, runs nothing and borrows no workspace.
func TestHelpWithNothingOpen(t *testing.T) {
	g := Geom{N: 4, C: 2, H: 4, W: 4, F: 2, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, OH: 4, OW: 4, Chunk: 1}
	c, err := Lookup(g)
	if err != nil {
		t.Fatal(err)
	}
	sh := NewShare()
	borrowed := 0
	borrow := func(n int) []float32 { borrowed++; return make([]float32, n) }
	var got []bool
	got = append(got, sh.Help(borrow, func([]float32) {}))
	sh.job.Store(&shareJob{c: c, p: Forward}) // as RunShared does before the generation
	got = append(got, sh.Help(borrow, func([]float32) {}))
	x, k, y := make([]float32, 4*2*16), make([]float32, 2*2*9), make([]float32, 4*2*16)
	if err := c.RunShared(sh, Forward, x, k, nil, y, make([]float32, c.Workspace(Forward))); err != nil {
		t.Fatal(err)
	}
	got = append(got, sh.Help(borrow, func([]float32) {}))
	if diff := cmp.Diff([]bool{false, false, false}, got); diff != "" || borrowed != 0 {
		t.Errorf("Help before and after a run (-want +got):\n%s\nworkspaces borrowed: %d, want 0", diff, borrowed)
	}
}

// TestHelperFailureIsTheOwners: a chunk that fails fails the owner's run,
// with the failing chunk's step, whether the owner or a helper took it; no
// one starts a chunk after it; and the next run on the same Share, with no
// failure, gives Run's bits.
func TestHelperFailureIsTheOwners(t *testing.T) {
	g := Geom{N: 6, C: 4, H: 5, W: 5, F: 8, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, OH: 5, OW: 5, Chunk: 1, NHWC: true}
	c, err := Lookup(g)
	if err != nil {
		t.Fatal(err)
	}
	x, k, y, _ := randomArgs(g, 9)
	want := make([]float32, len(y))
	if err := c.Run(Forward, x, k, nil, want, make([]float32, c.Workspace(Forward))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		helper bool // a helper takes every chunk before the owner takes any
		fail   int  // the chunk that fails
	}{
		{"owner, first chunk", false, 0},
		{"owner, middle chunk", false, 3},
		{"helper, first chunk", true, 0},
		{"helper, middle chunk", true, 3},
		{"helper, last chunk", true, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh := NewShare()
			sh.failChunk(tc.fail)
			got := make([]float32, len(y))
			helps := 0 // the helper's calls that took chunks, counted by the workspaces they borrow
			opened := func() {}
			if tc.helper {
				opened = func() {
					sh.Help(func(n int) []float32 { helps++; return make([]float32, n) }, func([]float32) {})
				}
			}
			err := c.runShared(sh, Forward, x, k, nil, got, make([]float32, c.Workspace(Forward)), opened)
			if err == nil || !strings.Contains(err.Error(), "injected failure") {
				t.Fatalf("error %v, want the injected failure", err)
			}
			// Chunk i of one image writes got[i·per:(i+1)·per]: neither the
			// failing chunk nor any after it may have run.
			per := len(y) / g.N
			for i := tc.fail * per; i < len(got); i++ {
				if got[i] != 0 {
					t.Fatalf("output %d (chunk %d, from the failing chunk %d on) written", i, i/per, tc.fail)
				}
			}
			sh.failChunk(-1)
			clear(got)
			if err := c.runShared(sh, Forward, x, k, nil, got, make([]float32, c.Workspace(Forward)), opened); err != nil {
				t.Fatalf("the run after: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the run after (-Run +RunShared):\n%s", diff)
			}
			if tc.helper && helps != 2 {
				t.Errorf("the helper borrowed %d workspaces in two runs, want 2", helps)
			}
		})
	}
}

// TestShareAcrossPasses: one Share runs passes of two convolutions of very
// different workspaces in turn while helpers keep helping all along, across
// the passes' ends and starts; every run gives Run's bits, and no helper
// writes past the workspace it borrowed for the pass it joined.
func TestShareAcrossPasses(t *testing.T) {
	type run struct {
		c             *Conv
		p             Pass
		in0, in1, out []float32
		want          []float32
	}
	var runs []run
	for _, g := range []Geom{
		{N: 8, C: 16, H: 16, W: 16, F: 16, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, OH: 16, OW: 16, Chunk: 1},
		{N: 6, C: 2, H: 5, W: 5, F: 3, KH: 1, KW: 1, SH: 1, SW: 1, OH: 5, OW: 5, Chunk: 1, NHWC: true},
	} {
		c, err := Lookup(g)
		if err != nil {
			t.Fatal(err)
		}
		x, k, y, _ := randomArgs(g, 5)
		for _, p := range []struct {
			p        Pass
			in0, in1 []float32
			out      int
		}{{Forward, x, k, len(y)}, {InputGrad, y, k, len(x)}} {
			want := make([]float32, p.out)
			if err := c.Run(p.p, p.in0, p.in1, nil, want, make([]float32, c.Workspace(p.p))); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run{c, p.p, p.in0, p.in1, make([]float32, p.out), want})
		}
	}
	sh := NewShare()
	var stop atomic.Bool
	var overrun atomic.Int64 // workspaces written past their end
	guard := 0               // the largest workspace: a helper of one pass with another's would write past it
	for _, r := range runs {
		guard = max(guard, r.c.Workspace(r.p))
	}
	borrow := func(n int) []float32 {
		ws := make([]float32, n+guard)
		for i := n; i < len(ws); i++ {
			ws[i] = -1
		}
		return ws[:n]
	}
	giveBack := func(ws []float32) {
		for _, v := range ws[len(ws):cap(ws)] {
			if v != -1 {
				overrun.Add(1)
				return
			}
		}
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				sh.Help(borrow, giveBack)
			}
		})
	}
	defer wg.Wait()        // on a failure
	defer stop.Store(true) // likewise
	for i := range 200 {
		r := runs[i%len(runs)]
		clear(r.out)
		if err := r.c.RunShared(sh, r.p, r.in0, r.in1, nil, r.out, make([]float32, r.c.Workspace(r.p))); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r.want, r.out); diff != "" {
			t.Fatalf("run %d, %v (-Run +RunShared):\n%s", i, r.p, diff)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := overrun.Load(); n > 0 {
		t.Errorf("%d helpers' workspaces were written past their end", n)
	}
}

// randomArgs returns normal random images, kernel, output (gradient) and
// bias for g, from seed.
func randomArgs(g Geom, seed uint64) (x, k, y, b []float32) {
	r := rand.New(rand.NewPCG(seed, uint64(g.N*g.C)))
	x, k, y, b = make([]float32, g.N*g.C*g.H*g.W), make([]float32, g.F*g.C*g.KH*g.KW), make([]float32, g.N*g.F*g.OH*g.OW), make([]float32, g.F)
	for _, s := range [][]float32{x, k, y, b} {
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
	}
	return x, k, y, b
}
