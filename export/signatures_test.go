package export_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// rewriteSignatures edits signatures.json of the version directory dir and
// records its new size and checksum in manifest.json, as a buggy or
// hostile writer would: only Load's checks of the content stand between it
// and the model.
func rewriteSignatures(t *testing.T, dir string, edit func(*exportdir.Signatures)) {
	t.Helper()
	spath := filepath.Join(dir, exportdir.SignaturesFile)
	b, err := os.ReadFile(spath)
	if err != nil {
		t.Fatal(err)
	}
	var sigs exportdir.Signatures
	if err := json.Unmarshal(b, &sigs); err != nil {
		t.Fatal(err)
	}
	edit(&sigs)
	if b, err = json.Marshal(sigs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	fixManifest(t, dir, exportdir.SignaturesFile)
}

// fixManifest records the size and checksum of the file rel of dir in the
// version's manifest.json.
func fixManifest(t *testing.T, dir, rel string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	sum, n, err := exportdir.Sum(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(dir, exportdir.ManifestFile)
	b, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var m exportdir.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for i := range m.Files {
		if m.Files[i].Path == rel {
			m.Files[i].SHA256, m.Files[i].Bytes = sum, n
		}
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mpath, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadChecksSignatureShapes: an input shape whose size overflows, or
// whose one example would take more memory than any sane request, is an
// error naming the input and signatures.json, not a panic or an
// allocation that kills the process.
func TestLoadChecksSignatureShapes(t *testing.T) {
	_, src := exportLinreg(t)
	linear := replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
	tests := []struct {
		name  string
		shape []int
		want  []string
	}{
		{"size overflows", []int{-1, 1 << 40, 1 << 40}, []string{"too large"}},
		{"size overflows to a small number", []int{-1, 1 << 62, 4, 2}, []string{"too large"}},
		{"one example of 16 GiB", []int{-1, 1 << 31}, []string{"too large"}},
		{"a zero dimension", []int{-1, 0}, []string{"positive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyVersion(t, src, "1")
			rewriteSignatures(t, dir, func(s *exportdir.Signatures) {
				s.Signatures[model.DefaultServingSignature].Inputs["x"] = exportdir.TensorInfo{Dtype: "float64", Shape: tc.shape}
			})
			p, err := export.Load(dir, linear)
			if err == nil {
				p.Close()
				t.Fatal("Load succeeded")
			}
			wanterr.Mentions(t, err, append([]string{filepath.Join(dir, exportdir.SignaturesFile), `input "x"`}, tc.want...)...)
		})
	}
}
