package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/layers"
)

// TestAlternation: the setting flips after every step, untimed steps count
// for nothing, the summary pairs every two neighbouring timed steps (off
// over on, whichever came first) and takes medians; the setting is on
// again after restore; an unknown setting is an error, and "" none.
func TestAlternation(t *testing.T) {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	for _, c := range []struct {
		name    string
		untimed int // the first steps'
		steps   []time.Duration
		want    string
		wantSet []bool // the setting after each step
	}{
		{
			name:    "odd warmup",
			untimed: 1,
			steps:   []time.Duration{ms(500), ms(110), ms(100), ms(99), ms(120), ms(130), ms(100), ms(100), ms(90), ms(220)},
			// off/on of every two neighbours: 1.1, 0.99, 0.825, 1.083, 1.3, 1, 1.111, 2.444.
			want:    "alternate=share on_ms_p50=100.000 off_ms_p50=110.000 off/on_p50=1.0917 pairs=8",
			wantSet: []bool{false, true, false, true, false, true, false, true, false, true},
		},
		{
			name:    "even warmup",
			untimed: 2,
			steps:   []time.Duration{ms(500), ms(500), ms(100), ms(110)},
			want:    "alternate=share on_ms_p50=100.000 off_ms_p50=110.000 off/on_p50=1.1000 pairs=1",
			wantSet: []bool{false, true, false, true},
		},
		{
			name:    "one step",
			untimed: 1,
			steps:   []time.Duration{ms(500), ms(110)},
			want:    "alternate=share: too few steps (need 2 timed steps)",
			wantSet: []bool{false, true},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := newAlternation("share")
			if err != nil {
				t.Fatal(err)
			}
			defer a.restore()
			var set []bool
			for i, d := range c.steps {
				a.step(d, i >= c.untimed)
				set = append(set, layers.SharesConvolutions())
			}
			if diff := cmp.Diff(c.wantSet, set); diff != "" {
				t.Errorf("the setting after each step (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.want, a.summary()); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			a.restore()
			if !layers.SharesConvolutions() {
				t.Error("sharing is off after restore")
			}
		})
	}
	if a, err := newAlternation(""); a != nil || err != nil {
		t.Errorf(`newAlternation(""): %v, %v; want nil, nil`, a, err)
	}
	if _, err := newAlternation("gc"); err == nil {
		t.Error(`newAlternation("gc"): no error`)
	}
}
