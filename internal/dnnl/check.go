//go:build dnnl

package dnnl

import "fmt"

// check says what is wrong with Run's arguments: a slice shorter than the
// geometry says, or a missing bias or workspace.
func (c *Conv) check(p Pass, in0, in1, bias, out, ws []float32) error {
	if p < Forward || p > KernelGrad {
		return fmt.Errorf("oneDNN convolution %+v: no pass %d", c.g, int(p))
	}
	want := c.g.sizes(p)
	for i, s := range [][]float32{in0, in1, out} {
		if len(s) != want[i] || want[i] == 0 {
			return fmt.Errorf("oneDNN convolution %+v, %v: argument %d has %d elements, want %d (and more than none)", c.g, p, i, len(s), want[i])
		}
	}
	if p == Forward && c.g.Bias && len(bias) != c.g.F {
		return fmt.Errorf("oneDNN convolution %+v: bias has %d elements, want %d", c.g, len(bias), c.g.F)
	}
	if n := c.Workspace(p); len(ws) < n || len(ws) == 0 {
		return fmt.Errorf("oneDNN convolution %+v, %v: workspace has %d elements, want %d", c.g, p, len(ws), n)
	}
	return nil
}

// sizes returns the elements of in0, in1 and out for pass p.
func (g Geom) sizes(p Pass) [3]int {
	x, k, y := g.N*g.C*g.H*g.W, g.F*g.C*g.KH*g.KW, g.N*g.F*g.OH*g.OW
	switch p {
	case InputGrad:
		return [3]int{y, k, x}
	case KernelGrad:
		return [3]int{x, y, k}
	}
	return [3]int{x, k, y}
}
