// Package scopes is the plumbing of towers.Scope that the tower runtime,
// the engine and the layers use and model code does not: a tower's sparse
// features and the batch row its shard starts at, which the runtime sets,
// the embedding lookups the layers register so that a table's gradient is
// sparse, and the updates and groups the engine reads. Model code sees
// only the Scope's public methods.
package scopes

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/scopes/hook"
	"github.com/towerflow/towerflow/sharding"
	"github.com/towerflow/towerflow/towers"
)

// plumbing is what package towers sets hook.Impl to.
type plumbing interface {
	AddLookup(s *towers.Scope, l towers.Lookup) error
	Lookups(s *towers.Scope) []towers.Lookup
	VariableName(s *towers.Scope, n *G.Node) (string, bool)
	SetRowOffset(s *towers.Scope, offset int)
	RowOffset(s *towers.Scope) int
	AddSparseFeature(s *towers.Scope, f *towers.SparseFeature) error
	NewSparseFeature(name string, dtype tensor.Dtype, shape []int, dense *G.Node) *towers.SparseFeature
	SetSparse(f *towers.SparseFeature, v sharding.SparseCOO, offset int) error
	Updates(s *towers.Scope) []towers.Update
	Groups(s *towers.Scope) []*towers.Group
}

// impl is package towers' plumbing: towers, which this package imports,
// has set it before this package initializes.
var impl = hook.Impl.(plumbing)

// AddLookup registers a lookup of one of s's variables (the layers'
// embedding lookups call it), so that its gradient is sparse (see
// towers.Lookup). It is an error for a lookup without output or slices,
// of a variable s did not ask for, or whose output is not of s's graph.
func AddLookup(s *towers.Scope, l towers.Lookup) error { return impl.AddLookup(s, l) }

// Lookups returns s's lookups in the order added.
func Lookups(s *towers.Scope) []towers.Lookup { return impl.Lookups(s) }

// VariableName returns the name of s's variable whose node is n.
func VariableName(s *towers.Scope, n *G.Node) (string, bool) { return impl.VariableName(s, n) }

// SetRowOffset records that s's shard starts at row offset of the step's
// batch: the engine sets it as it feeds the tower, and errors about a row
// of the data (an embedding id out of range) name the batch's row.
func SetRowOffset(s *towers.Scope, offset int) { impl.SetRowOffset(s, offset) }

// RowOffset returns the row of the batch s's shard starts at in the
// current step (0 before the first).
func RowOffset(s *towers.Scope) int { return impl.RowOffset(s) }

// AddSparseFeature makes f s's sparse feature of its name: the tower
// runtime calls it as it adds the tower's inputs. A feature of a name s
// has already is an error.
func AddSparseFeature(s *towers.Scope, f *towers.SparseFeature) error {
	return impl.AddSparseFeature(s, f)
}

// NewSparseFeature returns the sparse feature name of dtype and shard
// dense shape shape, whose densified node is dense (nil: none).
func NewSparseFeature(name string, dtype tensor.Dtype, shape []int, dense *G.Node) *towers.SparseFeature {
	return impl.NewSparseFeature(name, dtype, shape, dense)
}

// SetSparse feeds f the shard v, whose row 0 is row offset of the batch,
// for the following runs. v must have f's dtype and dense shape.
func SetSparse(f *towers.SparseFeature, v sharding.SparseCOO, offset int) error {
	return impl.SetSparse(f, v, offset)
}

// Updates returns the updates s's tower declared (Scope.Assign,
// AssignAdd), in order.
func Updates(s *towers.Scope) []towers.Update { return impl.Updates(s) }

// Groups returns the groups of the build s belongs to (Scope.Group), in
// the order they were made. It is the scope's own slice, not a copy, and
// must not be changed: the engine reads it on every step.
func Groups(s *towers.Scope) []*towers.Group { return impl.Groups(s) }
