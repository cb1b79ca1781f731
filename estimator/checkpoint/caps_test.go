package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestMetadataOverItsCap: a manifest or pointer file larger than any real
// one is damage, named with its path and the cap, refused without being
// read (the sparse files here would take their size in memory): Read of
// the model directory passes over it to the previous checkpoint, or scans
// the directory for checkpoints.
func TestMetadataOverItsCap(t *testing.T) {
	tests := []struct {
		name     string
		file     func(dir string) string
		cap      int64
		wantPath string // the checkpoint Read(dir) returns
	}{
		{"manifest", func(dir string) string { return filepath.Join(dir, "ckpt-3", ManifestFile) }, maxManifestBytes, "ckpt-2"},
		{"pointer file", func(dir string) string { return filepath.Join(dir, PointerFile) }, maxPointerBytes, "ckpt-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, testVars[:3], 1)
			for step := int64(1); step <= 3; step++ {
				if _, err := Save(dir, s, step, 0); err != nil {
					t.Fatal(err)
				}
			}
			p := tt.file(dir)
			if err := os.Truncate(p, tt.cap+1); err != nil {
				t.Fatal(err)
			}
			tooLarge := fmt.Sprintf("%s is over %d bytes: damaged?", p, tt.cap)
			if tt.name == "manifest" {
				_, err := Read(filepath.Dir(p))
				wanterr.Mentions(t, err, tooLarge)
			}
			r, err := Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := filepath.Base(r.Path()); got != tt.wantPath {
				t.Errorf("Read(model dir) read %s, want %s", got, tt.wantPath)
			}
			if skipped := strings.Join(r.Skipped(), "\n"); !strings.Contains(skipped, tooLarge) {
				t.Errorf("Skipped() = %q, want it to say %q", skipped, tooLarge)
			}
		})
	}
}
