// Package testpython finds a Python interpreter for tests that check
// towerflow's files with an independent reader (NumPy for .npy files,
// protobuf for TensorBoard event files). Without one, a test skips — and
// fails when it runs in CI (CI=true), which installs the interpreter's
// packages: a check that skips in CI would be a check that never runs.
package testpython

import (
	_ "embed"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Find returns a Python interpreter that can import every module of
// imports (e.g. "numpy"), else skips t, or fails it under CI=true.
// $TOWERFLOW_PYTHON is tried first, then python3 on $PATH, then
// /usr/bin/python3 (where Debian's python3-* packages install when a pyenv
// or virtualenv python3 comes first on $PATH). debPackages names what to
// install, for the message.
func Find(t testing.TB, debPackages string, imports ...string) string {
	t.Helper()
	var cands []string
	if p := os.Getenv("TOWERFLOW_PYTHON"); p != "" {
		cands = append(cands, p)
	}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	cands = append(cands, "/usr/bin/python3")
	script := "import " + strings.Join(imports, ", ")
	for _, p := range cands {
		if err := exec.Command(p, "-c", script).Run(); err == nil {
			return p
		}
	}
	msg := "no python3 that can " + script + " (tried " + strings.Join(cands, ", ") + "); install " + debPackages + " (apt-get install), or set TOWERFLOW_PYTHON"
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true: " + msg)
	} else {
		t.Skip(msg)
	}
	return ""
}

//go:embed tfrecord.py
var tfrecordPy string

// WithTFRecord returns script after tfrecord.py, for python -c: the
// TFRecord framing (records, frame, checked masked CRC-32Cs) and protobuf
// helpers (message_class, unknown_fields) that the scripts checking our
// TFRecord files share, written without any of towerflow's Go code.
func WithTFRecord(script string) string { return tfrecordPy + "\n" + script }
