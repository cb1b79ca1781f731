package main

import (
	"fmt"
	"time"

	"github.com/towerflow/towerflow/layers"
)

// alternation turns a setting off and on at every other step of a run, so
// that a change worth a percent or two, below what whole runs resolve on a
// noisy machine, is measured between neighbouring steps, which the host's
// slow drifts move together (-alternate).
type alternation struct {
	name string
	set  func(on bool)
	on   bool
	// steps are the timed steps' durations, each with the setting it ran
	// under.
	steps []altStep
}

type altStep struct {
	on bool
	d  time.Duration
}

// alternations are the settings -alternate takes.
var alternations = map[string]func(on bool){
	"share": layers.ShareConvolutions, // a waiting tower helps with the late one's convolution
}

// checkAlternation says whether -alternate names a setting ("" none).
func checkAlternation(name string) error {
	if _, ok := alternations[name]; !ok && name != "" {
		return fmt.Errorf("unknown setting %q (want share)", name)
	}
	return nil
}

// newAlternation returns the alternation of the setting called name, on
// for the first step; nil for "".
func newAlternation(name string) (*alternation, error) {
	if err := checkAlternation(name); err != nil || name == "" {
		return nil, err
	}
	set := alternations[name]
	set(true)
	return &alternation{name: name, set: set, on: true}, nil
}

// step notes a step of duration d (timed says it counts) and flips the
// setting for the next.
func (a *alternation) step(d time.Duration, timed bool) {
	if timed {
		a.steps = append(a.steps, altStep{a.on, d})
	}
	a.on = !a.on
	a.set(a.on)
}

// restore turns the setting back on, its default.
func (a *alternation) restore() { a.set(true) }

// summary is the line -alternate prints: the median step with the setting
// on and off, and the median over every two neighbouring timed steps of
// off/on.
func (a *alternation) summary() string {
	var on, off []time.Duration
	var ratios []float64
	for i, s := range a.steps {
		if s.on {
			on = append(on, s.d)
		} else {
			off = append(off, s.d)
		}
		// Every two neighbouring steps, which come on then off as often
		// as off then on.
		if i > 0 && s.on != a.steps[i-1].on {
			p, q := a.steps[i-1], s
			if p.on {
				p, q = q, p
			}
			ratios = append(ratios, float64(p.d)/float64(q.d))
		}
	}
	if len(on) == 0 || len(off) == 0 {
		return fmt.Sprintf("alternate=%s: too few steps (need 2 timed steps)", a.name)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("alternate=%s on_ms_p50=%.3f off_ms_p50=%.3f off/on_p50=%.4f pairs=%d",
		a.name, ms(median(on)), ms(median(off)), median(ratios), len(ratios))
}
