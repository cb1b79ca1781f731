#!/bin/bash
# Prints what a GPU machine offers a towerflow GPU backend (docs/gpu.md):
# the GPU, driver, toolkit and library versions; whether gorgonia.org/cu
# builds; CUDA's libraries loaded without cgo (purego); and PyTorch's
# ResNet-20 (bench/torch_resnet.py) on the GPU.
#
# Run from the repository root on the GPU machine, with a Go toolchain on
# PATH. A machine without network needs this module's dependencies
# vendored beforehand (cd bench/gpuprobe && go mod vendor; vendor/ is
# ignored by git, so carry it).
set -u
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
nvcc --version | tail -2
find / -xdev \( -name 'libcudnn.so.[0-9]' -o -name 'libcublas.so.[0-9]*' -o -name 'libnvrtc.so.[0-9]*' -o -name 'libcuda.so.1' \) 2>/dev/null
grep -n "define cuCtxCreate " /usr/local/cuda/include/cuda.h
mod=-mod=mod
[ -d bench/gpuprobe/vendor ] && mod=-mod=vendor
echo "== gorgonia.org/cu"
(cd bench/gpuprobe && GOFLAGS=$mod go build -o /tmp/gpuprobe-cu ./cu && /tmp/gpuprobe-cu)
echo "== purego, CGO_ENABLED=0"
cudnn=$(dirname "$(find / -xdev -name 'libcudnn.so.9' 2>/dev/null | head -1)")
(cd bench/gpuprobe && GOFLAGS=$mod CGO_ENABLED=0 go build -o /tmp/gpuprobe-purego ./purego) &&
	LD_LIBRARY_PATH=$cudnn:${LD_LIBRARY_PATH:-} /tmp/gpuprobe-purego
echo "== PyTorch ResNet-20 on the GPU"
for batch in 128 512; do
	for opts in "" "--channels-last" "--channels-last --bf16"; do
		echo "batch $batch $opts: $(python3 bench/torch_resnet.py --device cuda --batch $batch --steps 100 --warmup 20 $opts 2>/dev/null)"
	done
done
