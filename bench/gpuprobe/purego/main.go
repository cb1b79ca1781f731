// Command purego loads CUDA's driver, cuBLAS, cuDNN and NVRTC at run time
// without cgo and prints their versions.
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/ebitengine/purego"
)

func open(names ...string) uintptr {
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			fmt.Println("loaded", n)
			return h
		}
		fmt.Println("not loaded", n, err)
	}
	return 0
}

func main() {
	cuda := open("libcuda.so.1", "libcuda.so")
	if cuda == 0 {
		os.Exit(1)
	}
	var cuInit func(uint32) int32
	var cuDriverGetVersion func(*int32) int32
	var cuDeviceGetCount func(*int32) int32
	var cuDeviceGetName func(*byte, int32, int32) int32
	purego.RegisterLibFunc(&cuInit, cuda, "cuInit")
	purego.RegisterLibFunc(&cuDriverGetVersion, cuda, "cuDriverGetVersion")
	purego.RegisterLibFunc(&cuDeviceGetCount, cuda, "cuDeviceGetCount")
	purego.RegisterLibFunc(&cuDeviceGetName, cuda, "cuDeviceGetName")
	fmt.Println("cuInit", cuInit(0))
	var v, n int32
	fmt.Println("cuDriverGetVersion", cuDriverGetVersion(&v), v)
	fmt.Println("cuDeviceGetCount", cuDeviceGetCount(&n), n)
	name := make([]byte, 128)
	r := cuDeviceGetName(&name[0], 128, 0)
	fmt.Println("cuDeviceGetName", r, string(bytes.TrimRight(name, "\x00")))
	if h := open("libcublas.so.13", "libcublas.so"); h != 0 {
		var ver func(uintptr, *int32) int32
		var create func(*uintptr) int32
		purego.RegisterLibFunc(&create, h, "cublasCreate_v2")
		purego.RegisterLibFunc(&ver, h, "cublasGetVersion_v2")
		var hd uintptr
		var bv int32
		fmt.Println("cublasCreate", create(&hd), "cublasGetVersion", ver(hd, &bv), bv)
	}
	if h := open("libnvrtc.so.13", "libnvrtc.so"); h != 0 {
		var ver func(*int32, *int32) int32
		purego.RegisterLibFunc(&ver, h, "nvrtcVersion")
		var a, b int32
		fmt.Println("nvrtcVersion", ver(&a, &b), a, b)
	}
	if h := open("libcudnn.so.9", "libcudnn.so"); h != 0 {
		var ver func() uint64
		purego.RegisterLibFunc(&ver, h, "cudnnGetVersion")
		fmt.Println("cudnnGetVersion", ver())
	}
}
