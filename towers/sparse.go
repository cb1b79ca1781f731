package towers

import (
	"fmt"
	"maps"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/sharding"
)

// SparseFeature is a tower's sparse feature: its shard of a batch's
// sharding.SparseCOO (rows rebased to the shard), fed before every run. Its
// dense shape is fixed for the build ([shard rows, the batch's dense shape
// after its first dimension]); its number of entries changes from step to
// step, which is why it is no node of the graph: ops that read it
// (layers.EmbeddingLookupSparse) read Value when they run. Dense is the
// densified node the model function also gets as features[name]; the
// engine densifies a step's value only when the graph uses that node.
type SparseFeature struct {
	name   string
	dtype  tensor.Dtype
	shape  []int
	dense  *G.Node
	value  sharding.SparseCOO
	offset int
}

// newSparseFeature returns the sparse feature name of dtype and shard
// dense shape shape, whose densified node is dense (nil: none). The tower
// runtime makes them (internal/scopes); model code gets them from
// Scope.SparseFeature.
func newSparseFeature(name string, dtype tensor.Dtype, shape []int, dense *G.Node) *SparseFeature {
	return &SparseFeature{name: name, dtype: dtype, shape: slices.Clone(shape), dense: dense}
}

// Name returns the feature's name in the batch.
func (f *SparseFeature) Name() string { return f.name }

// Dtype returns the dtype of the feature's values.
func (f *SparseFeature) Dtype() tensor.Dtype { return f.dtype }

// DenseShape returns the dense shape of the tower's shard: [shard rows,
// the batch's dense shape after its first dimension].
func (f *SparseFeature) DenseShape() []int { return slices.Clone(f.shape) }

// Rows returns the shard's rows: DenseShape()[0].
func (f *SparseFeature) Rows() int { return f.shape[0] }

// Dense returns the feature's densified node, [DenseShape()...] with zeros
// where the shard has no entry (duplicates summed): what features[name]
// holds. The engine densifies a step's shard only when the graph uses it.
func (f *SparseFeature) Dense() *G.Node { return f.dense }

// Value returns the shard fed for the current run; ops read it when they
// run. Its rows are the shard's (0 is the shard's first row).
func (f *SparseFeature) Value() sharding.SparseCOO { return f.value }

// Offset returns the row of the whole batch the shard's row 0 is: errors
// name a batch row as Offset()+shard row.
func (f *SparseFeature) Offset() int { return f.offset }

// set feeds the shard v, whose row 0 is row offset of the batch, for the
// following runs: the tower runtime calls it (internal/scopes). v must
// have the feature's dtype and dense shape.
func (f *SparseFeature) set(v sharding.SparseCOO, offset int) error {
	if v.Values == nil || v.Values.Dtype() != f.dtype || !slices.Equal(v.DenseShape, f.shape) {
		got := "nil values"
		if v.Values != nil {
			got = fmt.Sprintf("dtype %v dense shape %v", v.Values.Dtype(), v.DenseShape)
		}
		return fmt.Errorf("sparse feature %q wants dtype %v dense shape %v, got %s", f.name, f.dtype, f.shape, got)
	}
	f.value, f.offset = v, offset
	return nil
}

// addSparseFeature makes f the tower's sparse feature of its name: the
// tower runtime calls it as it adds the tower's inputs (internal/scopes).
func (s *Scope) addSparseFeature(f *SparseFeature) error {
	if f == nil {
		return fmt.Errorf("%v: nil sparse feature", s)
	}
	if _, ok := s.sparse[f.name]; ok {
		return fmt.Errorf("%v: sparse feature %q added twice", s, f.name)
	}
	if s.sparse == nil {
		s.sparse = map[string]*SparseFeature{}
	}
	s.sparse[f.name] = f
	return nil
}

// SparseFeature returns the tower's sparse feature name: the batch's
// sharding.SparseCOO of that name, the tower's shard of it. A name the
// batch has no sparse feature of is an error naming those it has.
func (s *Scope) SparseFeature(name string) (*SparseFeature, error) {
	if f, ok := s.sparse[name]; ok {
		return f, nil
	}
	have := slices.Sorted(maps.Keys(s.sparse))
	if len(have) == 0 {
		return nil, fmt.Errorf("%v: sparse feature %q is not in the batch, which has no sparse features", s, name)
	}
	return nil, fmt.Errorf("%v: sparse feature %q is not in the batch, which has sparse features %q", s, name, have)
}

// SparseFeatures returns the tower's sparse features, sorted by name.
func (s *Scope) SparseFeatures() []*SparseFeature {
	out := make([]*SparseFeature, 0, len(s.sparse))
	for _, k := range slices.Sorted(maps.Keys(s.sparse)) {
		out = append(out, s.sparse[k])
	}
	return out
}

// Lookup is a gather of rows of a variable (an embedding lookup): the
// node Output reads rows of the variable Variable, and the gradient of
// the loss with respect to the variable through it is sparse: the rows it
// read, each with its share of Output's gradient. The engine leaves a
// variable that only lookups read out of symbolic differentiation (which
// would make a dense gradient of the table's size), asks for the gradient
// of Output instead (as large as Output) and hands it to Slices. Package
// layers registers its lookups through the engine's plumbing
// (internal/scopes); model code has no use for the type.
type Lookup struct {
	// Variable names the variable read (Scope.Variable's name).
	Variable string
	// Output is the lookup's output node; its op must not be
	// differentiable with respect to the variable. A lookup of a
	// partitioned table is one output read by one Lookup per partition.
	Output *G.Node
	// Slices returns the variable's gradient through the lookup given the
	// gradient of the loss with respect to Output in the last run (a
	// value of Output's shape): the ids of the rows read in that run, each
	// with its row of gradient. The result may share memory with the op
	// and stay valid only until the next run.
	Slices func(outGrad G.Value) (IndexedSlices, error)
}

// addLookup registers a lookup of one of the tower's variables (layers'
// embedding lookups call it, through internal/scopes), so that its
// gradient is sparse.
func (s *Scope) addLookup(l Lookup) error {
	if l.Output == nil || l.Slices == nil {
		return fmt.Errorf("%v: lookup of %q: nil output or slices", s, l.Variable)
	}
	if _, ok := s.vars[l.Variable]; !ok {
		return fmt.Errorf("%v: lookup of %q, which is not one of the tower's variables", s, l.Variable)
	}
	if l.Output.Graph() != s.g {
		return fmt.Errorf("%v: lookup of %q: output %s is not a node of the tower's graph", s, l.Variable, l.Output.Name())
	}
	s.lookups = append(s.lookups, l)
	return nil
}

// lookupList returns the tower's lookups in the order added.
func (s *Scope) lookupList() []Lookup { return slices.Clone(s.lookups) }

// variableName returns the name of the tower's variable whose node is n.
func (s *Scope) variableName(n *G.Node) (string, bool) {
	for _, name := range s.varOrder {
		if s.vars[name] == n {
			return name, true
		}
	}
	return "", false
}
