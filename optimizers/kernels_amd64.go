package optimizers

import "golang.org/x/sys/cpu"

// useAVX2 is whether float32 updates run in assembly (kernels_amd64.s),
// eight elements at a time, with the Go loops' operations in the Go loops'
// order: the same bits. Tests turn it off to compare.
var useAVX2 = cpu.X86.HasAVX2

// avx2Coeffs are coeffs[float32], each in the eight lanes of a vector, for
// the assembly to read as memory operands. The offsets are in
// kernels_amd64.s.
type avx2Coeffs struct {
	lr, decay, mom, b1, omb1, b2, omb2, corr1, corr2, eps, floor [8]float32
}

// broadcast returns k's coefficients, each in the eight lanes of a vector.
func broadcast(k *coeffs[float32]) *avx2Coeffs {
	p := new(avx2Coeffs)
	for _, f := range []struct {
		lanes *[8]float32
		v     float32
	}{
		{&p.lr, k.lr}, {&p.decay, k.decay}, {&p.mom, k.mom}, {&p.b1, k.b1}, {&p.omb1, k.omb1},
		{&p.b2, k.b2}, {&p.omb2, k.omb2}, {&p.corr1, k.corr1}, {&p.corr2, k.corr2}, {&p.eps, k.eps}, {&p.floor, k.floor},
	} {
		for i := range f.lanes {
			f.lanes[i] = f.v
		}
	}
	return p
}

// updateAVX2 runs update's loop for c's kind (not FTRL, which has no
// assembly) over w and g, whose length is a multiple of 8, and the slots,
// with the coefficients p.
func updateAVX2(c *config, p *avx2Coeffs, w, g []float32, slots [][]float32) {
	n := len(g)
	switch c.kind {
	case kindSGD:
		sgdAVX2(&w[0], &g[0], n, p)
	case kindMomentum:
		momentumAVX2(&w[0], &g[0], &slots[0][0], n, p, c.nesterov)
	case kindAdam:
		adamAVX2(&w[0], &g[0], &slots[0][0], &slots[1][0], n, p)
	case kindRMSProp:
		rmspropAVX2(&w[0], &g[0], &slots[0][0], n, p)
	case kindAdagrad:
		adagradAVX2(&w[0], &g[0], &slots[0][0], n, p)
	}
}

//go:noescape
func sgdAVX2(w, grad *float32, n int, p *avx2Coeffs)

//go:noescape
func momentumAVX2(w, grad, acc *float32, n int, p *avx2Coeffs, nesterov bool)

//go:noescape
func adamAVX2(w, grad, m, v *float32, n int, p *avx2Coeffs)

//go:noescape
func rmspropAVX2(w, grad, ms *float32, n int, p *avx2Coeffs)

//go:noescape
func adagradAVX2(w, grad, acc *float32, n int, p *avx2Coeffs)
