//go:build dnnl

package dnnl

/*
#include "conv.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// MatMul is oneDNN's bfloat16 matrix product of one shape: c = a·b for
// row-major a (M×K) and b (K×N) of bfloat16 bits and a float32 c (M×N),
// the products summed in float32. Made once per shape and kept for the
// life of the process.
type MatMul struct {
	m, n, k int
	c       *C.tf_matmul
}

var matmuls struct {
	sync.Mutex
	made map[[3]int]madeMatMul
}

type madeMatMul struct {
	mm  *MatMul
	err error
}

// LookupMatMul returns the bfloat16 product of shape (m, n, k), making it
// on first use; a shape oneDNN cannot make is an error, every time.
func LookupMatMul(m, n, k int) (*MatMul, error) {
	matmuls.Lock()
	defer matmuls.Unlock()
	key := [3]int{m, n, k}
	if r, ok := matmuls.made[key]; ok {
		return r.mm, r.err
	}
	if matmuls.made == nil {
		matmuls.made = map[[3]int]madeMatMul{}
	}
	var c *C.tf_matmul
	var step *C.char
	var r madeMatMul
	if s := C.tf_matmul_create(C.long(m), C.long(n), C.long(k), &c, &step); s != 0 {
		r.err = fmt.Errorf("oneDNN bfloat16 matrix product %d×%d·%d×%d: %s: %s", m, k, k, n, C.GoString(step), status(s))
	} else {
		r.mm = &MatMul{m: m, n: n, k: k, c: c}
	}
	matmuls.made[key] = r
	return r.mm, r.err
}

// Workspace returns the float32 elements Run needs in its workspace.
func (mm *MatMul) Workspace() int { return int((C.tf_matmul_workspace(mm.c) + 3) / 4) }

// Impl names the oneDNN implementation, e.g. "brg:avx512_core_bf16".
func (mm *MatMul) Impl() string { return C.GoString(C.tf_matmul_impl(mm.c)) }

// Run sets c = a·b with the workspace ws, at least Workspace() elements.
func (mm *MatMul) Run(a, b []uint16, c, ws []float32) error {
	if len(a) != mm.m*mm.k || len(b) != mm.k*mm.n || len(c) != mm.m*mm.n || len(ws) < mm.Workspace() {
		return fmt.Errorf("oneDNN bfloat16 matrix product %d×%d·%d×%d: arguments of %d, %d, %d and workspace %d elements, want %d, %d, %d and %d",
			mm.m, mm.k, mm.k, mm.n, len(a), len(b), len(c), len(ws), mm.m*mm.k, mm.k*mm.n, mm.m*mm.n, mm.Workspace())
	}
	var step *C.char
	if s := C.tf_matmul_run(mm.c, unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), ptr(c), unsafe.Pointer(&ws[0]), &step); s != 0 {
		return fmt.Errorf("oneDNN bfloat16 matrix product %d×%d·%d×%d: %s: %s", mm.m, mm.k, mm.k, mm.n, C.GoString(step), status(s))
	}
	return nil
}
