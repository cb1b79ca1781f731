package metrics

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"gorgonia.org/tensor"
)

// Metric is a streaming metric.
//
// A Metric is not safe for concurrent use; give every tower its own.
type Metric interface {
	// Kind names the metric and its configuration, e.g. "accuracy", "mean",
	// "auc(curve=ROC,thresholds=200)"; two metrics can be merged only when
	// kinds and state lengths agree.
	Kind() string
	// State is the live state vector; callers may add into it or zero it.
	State() []float64
	// Update folds one batch in. inputs are the values of Bound.Inputs for
	// that batch, in the same order (e.g. labels, predictions, and weights
	// when given). On error the state is left unchanged.
	Update(inputs []*tensor.Dense) error
	// Result computes the value from the state alone.
	Result() float64
}

// MultiResult is implemented by metrics whose value is a vector, such as
// PrecisionAtThresholds and RecallAtThresholds (one value per threshold).
// Result() of such a metric is one element of it (documented per metric);
// Results() is all of them, keyed by a suffix such as "threshold_0.5".
//
// The package-level Results reports each suffix of a metric named name as an
// extra entry "name/suffix" (besides "name" itself), so an estimator that
// reports Results gets one number per threshold for free, e.g.
// "precision/threshold_0.5" and "precision/threshold_0.9".
type MultiResult interface {
	Results() map[string]float64
}

// Merge adds src's state into dst. It fails, leaving dst unchanged, when the
// kinds or the state lengths differ.
func Merge(dst, src Metric) error {
	if dst == nil || src == nil {
		return fmt.Errorf("metrics: merge: nil metric (dst %v, src %v)", dst == nil, src == nil)
	}
	if dk, sk := dst.Kind(), src.Kind(); dk != sk {
		return fmt.Errorf("metrics: merge: kinds differ: dst %q, src %q", dk, sk)
	}
	d, s := dst.State(), src.State()
	if len(d) != len(s) {
		return fmt.Errorf("metrics: merge %q: state lengths differ: dst %d, src %d", dst.Kind(), len(d), len(s))
	}
	for i, v := range s {
		d[i] += v
	}
	return nil
}

// Reset zeroes m's state.
func Reset(m Metric) {
	clear(m.State())
}

// ReduceIntoFirst adds every replica's metric into tower 0's metric of the
// same name and zeroes the replicas. replicas[i] is tower i's metrics by
// name. Repeating it any number of times gives the same tower-0 state
// (idempotent, since replicas are zeroed).
//
// All towers must hold the same metric names, and each name the same Kind
// and state length, as tower 0; a replica must not share its state with
// tower 0. Otherwise the error names the tower index and the metric name,
// and nothing is modified: every tower is validated before any is added.
func ReduceIntoFirst(replicas []map[string]Metric) error {
	if len(replicas) == 0 {
		return nil
	}
	first := replicas[0]
	names := slices.Sorted(maps.Keys(first))
	for _, name := range names {
		if first[name] == nil {
			return fmt.Errorf("metrics: tower 0: metric %q is nil", name)
		}
	}
	for t := 1; t < len(replicas); t++ {
		rep := replicas[t]
		for _, name := range names {
			m, ok := rep[name]
			if !ok {
				return fmt.Errorf("metrics: tower %d: metric %q is missing (tower 0 has it)", t, name)
			}
			if m == nil {
				return fmt.Errorf("metrics: tower %d: metric %q is nil", t, name)
			}
			want := first[name]
			if k, k0 := m.Kind(), want.Kind(); k != k0 {
				return fmt.Errorf("metrics: tower %d: metric %q has kind %q, tower 0 has %q", t, name, k, k0)
			}
			s, s0 := m.State(), want.State()
			if len(s) != len(s0) {
				return fmt.Errorf("metrics: tower %d: metric %q (%s) has state length %d, tower 0 has %d", t, name, m.Kind(), len(s), len(s0))
			}
			if len(s) > 0 && &s[0] == &s0[0] {
				return fmt.Errorf("metrics: tower %d: metric %q shares its state with tower 0", t, name)
			}
		}
		if len(rep) != len(first) {
			for _, name := range slices.Sorted(maps.Keys(rep)) {
				if _, ok := first[name]; !ok {
					return fmt.Errorf("metrics: tower %d: metric %q is extra (tower 0 has no such metric)", t, name)
				}
			}
		}
	}
	for t := 1; t < len(replicas); t++ {
		for _, name := range names {
			dst, src := first[name].State(), replicas[t][name].State()
			for i, v := range src {
				dst[i] += v
			}
			clear(src)
		}
	}
	return nil
}

// Results returns Result() of each metric by name. A metric that implements
// MultiResult adds one more entry per element of its Results(), named
// name + "/" + suffix (e.g. "precision/threshold_0.5"); such an entry never
// replaces the Result of a metric that is itself so named.
func Results(ms map[string]Metric) map[string]float64 {
	out := make(map[string]float64, len(ms))
	for name, m := range ms {
		out[name] = m.Result()
	}
	for name, m := range ms {
		mr, ok := m.(MultiResult)
		if !ok {
			continue
		}
		for suffix, v := range mr.Results() {
			key := name + "/" + suffix
			if _, taken := ms[key]; !taken {
				out[key] = v
			}
		}
	}
	return out
}

// String formats results as "name=value" pairs sorted by name, for logs.
func String(results map[string]float64) string {
	names := slices.Sorted(maps.Keys(results))
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%g", n, results[n])
	}
	return b.String()
}
