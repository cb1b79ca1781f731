//go:build !mpi

// Command allreducebench needs the build tag mpi; see main.go.
package main

import (
	"fmt"
	"os"

	"github.com/towerflow/towerflow/collective"
)

func main() {
	fmt.Fprintln(os.Stderr, "allreducebench:", collective.ErrNoMPI)
	os.Exit(2)
}
