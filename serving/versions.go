package serving

// The models a server serves, the versions each serves (the newest, and
// those its labels name), the versions it served before, and the
// references that keep a version open while requests use it.

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/exportdir"
)

// maxRetired is how many replaced versions a model's status lists.
const maxRetired = 64

// servedModel is one configured model and the versions it serves.
type servedModel struct {
	name string
	load func(current int64) (Servable, error)
	// loadVersion loads a given version, for labels; nil when labels may
	// only name the version load gives.
	loadVersion func(version int64) (Servable, error)
	labels      map[string]int64 // never modified

	mu       sync.RWMutex
	latest   *servedVersion           // the newest; nil once the server is closed
	versions map[int64]*servedVersion // every version served: latest and those labels name
	retired  []*retiredVersion        // versions replaced, oldest first, at most maxRetired
	failed   map[int64]error          // versions of the base directory that failed to load
}

// servedVersion is one loaded version. refs counts the requests and
// batches using it: it is closed when it is no longer served and refs
// drops to zero. refs.Add happens under the model's read lock while the
// version is served, so it happens before the Wait that follows its
// retirement.
type servedVersion struct {
	s       Servable
	version int64
	sigs    map[string]export.Signature
	inputs  map[string]map[string]inputSpec // by signature, then input
	// exampleValues is the most JSON values one example of any signature
	// is written with (see jsonValues).
	exampleValues int
	// raw is the version's preprocessor: its requests carry raw
	// features; nil without one.
	raw  *rawInputs
	refs sync.WaitGroup
}

// retiredVersion is a version no longer served: UNLOADING until its last
// request is done and it is closed, then END.
type retiredVersion struct {
	version int64
	mu      sync.Mutex
	closed  bool
	err     error // from Close
}

// inputSpec is one input of a signature: its dtype name and the shape of
// one example.
type inputSpec struct {
	dtype  string
	shape  []int
	sparse bool // a list of at most shape[0] values per example
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
		if err := exportdir.CheckClassNames(sig); err != nil {
			return nil, fmt.Errorf("signature %q: %w", key, err)
		}
		v.inputs[key] = map[string]inputSpec{}
		for name, ti := range sig.Inputs {
			if _, ok := servedDtypes[ti.Dtype]; !ok {
				return nil, fmt.Errorf("signature %q: input %q has dtype %q, which cannot be served", key, name, ti.Dtype)
			}
			if len(ti.Shape) == 0 || slices.ContainsFunc(ti.Shape[1:], func(d int) bool { return d < 1 }) {
				return nil, fmt.Errorf("signature %q: input %q has shape %v: want the batch dimension first, then positive dimensions", key, name, ti.Shape)
			}
			if ti.Sparse {
				if len(ti.Shape) != 2 {
					return nil, fmt.Errorf("signature %q: sparse input %q has shape %v: want [-1, the most values per example]", key, name, ti.Shape)
				}
				if _, ok := s.(SparseServable); !ok {
					return nil, fmt.Errorf("signature %q: input %q is sparse, and the servable %T does not implement SparseServable", key, name, s)
				}
			}
			v.inputs[key][name] = inputSpec{dtype: ti.Dtype, shape: slices.Clone(ti.Shape[1:]), sparse: ti.Sparse}
		}
		n := 1 // the example's object, or the one input's value
		for _, in := range v.inputs[key] {
			n = satAdd(n, jsonValues(in.shape)+1) // +1: a flat list in a tf.Example
		}
		v.exampleValues = max(v.exampleValues, n)
	}
	if v.raw = rawInputsOf(s); v.raw != nil {
		// Raw features have no fixed size: the body's limit bounds them.
		v.exampleValues = math.MaxInt
	}
	return v, nil
}

// jsonValues is the number of JSON values (numbers and lists) one example
// of shape is written with as nested lists; it saturates at math.MaxInt.
func jsonValues(shape []int) int {
	n, lists := 0, 1
	for _, d := range shape {
		n = satAdd(n, lists) // the lists at this depth
		lists = satMul(lists, d)
	}
	return satAdd(n, lists) // and the numbers
}

func satAdd(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

func satMul(a, b int) int {
	if b != 0 && a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

func (v *servedVersion) release() { v.refs.Done() }

// finish records the end of a retired version's Close.
func (r *retiredVersion) finish(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed, r.err = true, err
}

// acquire returns the newest version, or version want when specific, with
// a reference taken; nil when the model does not serve it. closed tells
// that the server is closed.
func (m *servedModel) acquire(want int64, specific bool) (v *servedVersion, closed bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.latest == nil {
		return nil, true
	}
	v = m.latest
	if specific {
		v = m.versions[want]
	}
	if v != nil {
		v.refs.Add(1)
	}
	return v, false
}

// latestVersion returns the newest version served, 0 once closed.
func (m *servedModel) latestVersion() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.latest == nil {
		return 0
	}
	return m.latest.version
}

// served returns version if the model serves it, else nil.
func (m *servedModel) served(version int64) *servedVersion {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.versions[version]
}

// labelled tells whether a label names version.
func (m *servedModel) labelled(version int64) bool {
	for _, v := range m.labels {
		if v == version {
			return true
		}
	}
	return false
}

// replaceLatest makes v (a new version, or one served already) the
// newest. It returns the version v replaces, unless a label names it (it
// is then still served), with the record of its retirement; nil when
// there is none to retire.
func (m *servedModel) replaceLatest(v *servedVersion) (*servedVersion, *retiredVersion) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.latest
	m.latest = v
	m.versions[v.version] = v
	m.retired = slices.DeleteFunc(m.retired, func(r *retiredVersion) bool { return r.version == v.version })
	if old == nil || old == v || m.labelled(old.version) {
		return nil, nil
	}
	delete(m.versions, old.version)
	r := &retiredVersion{version: old.version}
	m.retired = append(m.retired, r)
	if len(m.retired) > maxRetired {
		m.retired = slices.Delete(m.retired, 0, len(m.retired)-maxRetired)
	}
	return old, r
}

// takeAll takes every version out of service, once the server closes,
// and returns them.
func (m *servedModel) takeAll() []*servedVersion {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := slices.Collect(maps.Values(m.versions))
	m.latest, m.versions = nil, map[int64]*servedVersion{}
	return all
}

// loadFailed records that version failed to load with err; it is not
// tried again.
func (m *servedModel) loadFailed(version int64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil {
		m.failed = map[int64]error{}
	}
	m.failed[version] = err
}

// failedToLoad tells whether version failed to load before.
func (m *servedModel) failedToLoad(version int64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, failed := m.failed[version]
	return failed
}

// versionState is one version's state in the model status API.
type versionState struct {
	version int64
	state   string // AVAILABLE, UNLOADING or END
	err     error  // a failed Close, or load
}

// states returns the state of every version the model serves or served,
// and of those that failed to load (END with their error), the newest
// first, as TensorFlow Serving lists them.
func (m *servedModel) states() []versionState {
	m.mu.RLock()
	var out []versionState
	for version := range m.versions {
		out = append(out, versionState{version: version, state: "AVAILABLE"})
	}
	for version, err := range m.failed {
		out = append(out, versionState{version: version, state: "END", err: err})
	}
	retired := slices.Clone(m.retired)
	m.mu.RUnlock()
	for _, r := range retired {
		r.mu.Lock()
		st := versionState{version: r.version, state: "UNLOADING", err: r.err}
		if r.closed {
			st.state = "END"
		}
		r.mu.Unlock()
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b versionState) int { return cmp.Compare(b.version, a.version) })
	return out
}
