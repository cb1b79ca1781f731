package serving

// The models a server serves, the version each serves, and the references
// that keep a version open while requests use it.

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/towerflow/towerflow/export"
)

// servedModel is one configured model and the version it serves.
type servedModel struct {
	name string
	load func(current int64) (Servable, error)
	mu   sync.RWMutex
	cur  *servedVersion // nil once the server is closed
}

// servedVersion is one loaded version. refs counts the requests and
// batches using it: it is closed when it has been replaced and refs drops
// to zero. refs.Add happens under the model's read lock while the version
// is current, so it happens before the Wait that follows its replacement.
type servedVersion struct {
	s       Servable
	version int64
	sigs    map[string]export.Signature
	inputs  map[string]map[string]inputSpec // by signature, then input
	refs    sync.WaitGroup
}

// inputSpec is one input of a signature: its dtype name and the shape of
// one example.
type inputSpec struct {
	dtype string
	shape []int
}

// newServedVersion reads s's signatures, which must take only inputs the
// server can decode.
func newServedVersion(s Servable) (*servedVersion, error) {
	v := &servedVersion{s: s, version: s.Version(), sigs: s.Signatures(), inputs: map[string]map[string]inputSpec{}}
	if v.version <= 0 {
		return nil, fmt.Errorf("version %d is not a positive integer", v.version)
	}
	for _, key := range slices.Sorted(maps.Keys(v.sigs)) {
		sig := v.sigs[key]
		if len(sig.Inputs) == 0 {
			return nil, fmt.Errorf("signature %q has no inputs", key)
		}
		v.inputs[key] = map[string]inputSpec{}
		for name, ti := range sig.Inputs {
			if _, ok := servedDtypes[ti.Dtype]; !ok {
				return nil, fmt.Errorf("signature %q: input %q has dtype %q, which cannot be served", key, name, ti.Dtype)
			}
			if len(ti.Shape) == 0 || slices.ContainsFunc(ti.Shape[1:], func(d int) bool { return d < 1 }) {
				return nil, fmt.Errorf("signature %q: input %q has shape %v: want the batch dimension first, then positive dimensions", key, name, ti.Shape)
			}
			v.inputs[key][name] = inputSpec{dtype: ti.Dtype, shape: slices.Clone(ti.Shape[1:])}
		}
	}
	return v, nil
}

func (v *servedVersion) release() { v.refs.Done() }

// acquire returns the current version with a reference taken, or nil once
// the server is closed.
func (m *servedModel) acquire() *servedVersion {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.cur != nil {
		m.cur.refs.Add(1)
	}
	return m.cur
}

func (m *servedModel) currentVersion() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.cur == nil {
		return 0
	}
	return m.cur.version
}

// swap makes v the current version (nil: none, once closed) and returns
// the one it replaces.
func (m *servedModel) swap(v *servedVersion) *servedVersion {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.cur
	m.cur = v
	return old
}
