package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzManifestPointer: a checkpoint whose manifest.json (which even) or
// whose model directory's pointer file (which odd) is any bytes — with
// the manifest's checksum made to vouch for them (fix) or not — reads
// (Read of the checkpoint, Latest and Read of the model directory) as an
// error, or as the one checkpoint there is: a reader whose names are its
// manifest's variables, each of which reads with the manifest's shape, and
// whose manifest, written again as Save writes it, reads back equal. It
// never panics. FuzzRead reaches these two files too, among all the
// checkpoint's; this target gives them the whole time. Seeds are the files
// Save writes.
//
//	go test -run '^$' -fuzz '^FuzzManifestPointer$' -fuzztime 60s -fuzzminimizetime 1s ./estimator/checkpoint
func FuzzManifestPointer(f *testing.F) {
	c := newFuzzCheckpoint(f)
	mpath, ppath := filepath.Join(Name(7), ManifestFile), PointerFile
	for which, name := range []string{mpath, ppath} {
		b := c.files[name]
		f.Add(uint8(which), b, false)
		f.Add(uint8(which), b[:len(b)/2], true)
	}
	f.Add(uint8(1), []byte(`{"format": "towerflow-checkpoint-v1", "latest": "ckpt-8", "checkpoints": ["ckpt-7", "ckpt-8"]}`), false)
	f.Add(uint8(1), []byte(`{"format": "towerflow-checkpoint-v1", "latest": "../ckpt-7", "checkpoints": ["../ckpt-7"]}`), false)
	f.Add(uint8(0), []byte(`{"format": "towerflow-checkpoint-v1", "step": 7, "variables": [{"name": "a", "dtype": "<f4", "shape": [1099511627776, 1099511627776], "file": "a.npy"}]}`), true)
	// One model directory for every input: each puts its file in, and
	// the saved one back after.
	dir := f.TempDir()
	for _, name := range c.names {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, c.files[name], 0o644); err != nil {
			f.Fatal(err)
		}
	}
	put := func(t *testing.T, name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, content []byte, fix bool) {
		target := mpath
		if which%2 == 1 {
			target = ppath
		}
		if fix && target == mpath {
			// The checksum made to vouch for the content, as a buggy
			// writer would, so that it reaches the checks behind it.
			var mf manifestFile
			if json.Unmarshal(content, &mf) == nil {
				if sum, err := mf.Manifest.checksum(); err == nil {
					mf.Checksum = sum
					if b, err := json.Marshal(mf); err == nil {
						content = b
					}
				}
			}
		}
		put(t, target, content)
		defer put(t, mpath, c.files[mpath])
		defer put(t, ppath, c.files[ppath])
		ckpt := filepath.Join(dir, Name(7))
		if latest, err := Latest(dir); err == nil && latest != ckpt {
			t.Fatalf("Latest(%s) = %s, not the one checkpoint there is", dir, latest)
		}
		for _, path := range []string{ckpt, dir} {
			r, err := Read(path)
			if err != nil {
				continue
			}
			if r.Path() != ckpt {
				t.Fatalf("Read(%s) read %s, not the one checkpoint there is", path, r.Path())
			}
			m := r.Manifest()
			var names []string
			for _, e := range m.Variables {
				names = append(names, e.Name)
				x, err := r.Tensor(e.Name)
				if err != nil {
					t.Fatalf("Read(%s) verified the checkpoint, Tensor(%q): %v", path, e.Name, err)
				}
				if got := []int(x.Shape()); len(e.Shape) > 0 && !slices.Equal(got, e.Shape) {
					t.Fatalf("Tensor(%q) has shape %v, the manifest says %v", e.Name, got, e.Shape)
				}
			}
			if diff := cmp.Diff(names, r.Names(), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("Names() (-manifest +got):\n%s", diff)
			}
			// The manifest read, written again as Save writes it, reads
			// back equal.
			sum, err := m.checksum()
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.MarshalIndent(manifestFile{Manifest: m, Checksum: sum}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ckpt, ManifestFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
			again, err := Read(ckpt)
			if err != nil {
				t.Fatalf("the manifest read from %s, written again: %v", path, err)
			}
			if diff := cmp.Diff(m, again.Manifest()); diff != "" {
				t.Fatalf("manifest written and read again (-first +again):\n%s", diff)
			}
		}
	})
}
