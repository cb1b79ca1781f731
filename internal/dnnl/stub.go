//go:build !dnnl

package dnnl

// Built says whether towerflow was built with oneDNN.
const Built = false

// Version names the oneDNN library; here, none.
func Version() string { return "" }

// BF16 is false without oneDNN.
func BF16() bool { return false }

// Conv is a convolution's oneDNN primitives; without oneDNN there are none.
type Conv struct{}

// Lookup says towerflow was built without oneDNN.
func Lookup(Geom) (*Conv, error) { return nil, ErrNotBuilt }

// Workspace is zero without oneDNN.
func (*Conv) Workspace(Pass) int { return 0 }

// Impl is empty without oneDNN.
func (*Conv) Impl(Pass) string { return "" }

// Run says towerflow was built without oneDNN.
func (*Conv) Run(Pass, []float32, []float32, []float32, []float32, []float32) error {
	return ErrNotBuilt
}

// MatMul is oneDNN's bfloat16 matrix product; without oneDNN there is none.
type MatMul struct{}

// LookupMatMul says towerflow was built without oneDNN.
func LookupMatMul(m, n, k int) (*MatMul, error) { return nil, ErrNotBuilt }

// Workspace is zero without oneDNN.
func (*MatMul) Workspace() int { return 0 }

// Impl is empty without oneDNN.
func (*MatMul) Impl() string { return "" }

// Run says towerflow was built without oneDNN.
func (*MatMul) Run(a, b []uint16, c, ws []float32) error { return ErrNotBuilt }

// Share is a pass other goroutines may join; without oneDNN there is none.
type Share struct{}

// NewShare returns nil without oneDNN.
func NewShare() *Share { return nil }

// RunShared says towerflow was built without oneDNN.
func (*Conv) RunShared(*Share, Pass, []float32, []float32, []float32, []float32, []float32) error {
	return ErrNotBuilt
}

// Help has nothing to run without oneDNN.
func (*Share) Help(func(int) []float32, func([]float32)) bool { return false }
