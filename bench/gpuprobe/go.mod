module github.com/towerflow/towerflow/bench/gpuprobe

go 1.26

require (
	github.com/ebitengine/purego v0.11.3
	gorgonia.org/cu v0.9.6
)

require (
	github.com/google/uuid v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
)
