package exportdir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		name string
		want int64
		ok   bool
	}{
		{"1", 1, true},
		{"999", 999, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"0999", 0, false},
		{"+999", 0, false},
		{"-1", 0, false},
		{"0", 0, false},
		{"00", 0, false},
		{"", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{" 1", 0, false},
		{"9223372036854775808", 0, false},
		{"٣", 0, false}, // a non-ASCII digit
	}
	for _, tc := range tests {
		v, ok := ParseVersion(tc.name)
		if v != tc.want || ok != tc.ok {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d, %v", tc.name, v, ok, tc.want, tc.ok)
		}
	}
}

func TestScanVersions(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"10", "2", "0999", "+3", "backup", ".tmp-4-abc"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "7"), nil, 0o644); err != nil { // a file, not a version
		t.Fatal(err)
	}
	vs, ignored, err := ScanVersions(base)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{2, 10}, vs); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"+3", "0999", "backup"}, ignored); diff != "" {
		t.Errorf("ignored (-want +got):\n%s", diff)
	}
	vs, ignored, err = ScanVersions(filepath.Join(base, "missing"))
	if err != nil || vs != nil || ignored != nil {
		t.Errorf("a missing base directory: %v, %v, %v", vs, ignored, err)
	}
}
