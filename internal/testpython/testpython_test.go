package testpython

import (
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder is a testing.TB that records a skip or a fatal failure instead
// of ending the test.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()      {}
func (r *recorder) Skip(...any)  { r.skipped = true }
func (r *recorder) Fatal(...any) { r.failed = true }

func TestFind(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("these tests need python3: %v", err)
	}
	tests := []struct {
		name    string
		ci      string
		imports []string
		want    recorder
		found   bool
	}{
		{name: "a module there", imports: []string{"json"}, found: true},
		{name: "a module there, in CI", ci: "true", imports: []string{"json", "zlib"}, found: true},
		{name: "a module missing", imports: []string{"json", "no_such_module_towerflow"}, want: recorder{skipped: true}},
		{name: "a module missing, in CI", ci: "true", imports: []string{"no_such_module_towerflow"}, want: recorder{failed: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv("TOWERFLOW_PYTHON", py)
			var r recorder
			got := Find(&r, "python3-something", tc.imports...)
			if diff := cmp.Diff(tc.want, r, cmp.AllowUnexported(recorder{}), cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".TB" }, cmp.Ignore())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if (got != "") != tc.found {
				t.Errorf("Find = %q, want an interpreter: %v", got, tc.found)
			}
		})
	}
}
