package towers

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/scopes/hook"
	"github.com/towerflow/towerflow/sharding"
)

// plumbing is the Scope's plumbing that package internal/scopes hands to
// the tower runtime, the engine and the layers (hook.Impl): model code
// has no way to it.
type plumbing struct{}

func init() { hook.Impl = plumbing{} }

func (plumbing) AddLookup(s *Scope, l Lookup) error              { return s.addLookup(l) }
func (plumbing) Lookups(s *Scope) []Lookup                       { return s.lookupList() }
func (plumbing) VariableName(s *Scope, n *G.Node) (string, bool) { return s.variableName(n) }
func (plumbing) SetRowOffset(s *Scope, offset int)               { s.rowOffset = offset }
func (plumbing) RowOffset(s *Scope) int                          { return s.rowOffset }
func (plumbing) AddSparseFeature(s *Scope, f *SparseFeature) error {
	return s.addSparseFeature(f)
}
func (plumbing) NewSparseFeature(name string, dtype tensor.Dtype, shape []int, dense *G.Node) *SparseFeature {
	return newSparseFeature(name, dtype, shape, dense)
}
func (plumbing) Updates(s *Scope) []Update { return s.updateList() }
func (plumbing) Groups(s *Scope) []*Group  { return s.groupList() }
func (plumbing) SetSparse(f *SparseFeature, v sharding.SparseCOO, offset int) error {
	return f.set(v, offset)
}
