package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// The big table: an embedding table of bigRows × bigDim float32, 256 MiB
// (1M × 64) without the race detector, 32 MiB under it.
const bigDim = 64

func bigRows() int {
	if raceEnabled {
		return 1 << 17
	}
	return 1 << 20
}

const bigName = "embedding/table"

// bigBits is element i of the big table of seed, as bits: every bit
// pattern occurs, NaNs with payloads, infinities, subnormals and -0
// included, so the round trip is checked bit for bit.
func bigBits(seed uint64, i int) uint32 {
	x := seed*0x9e3779b97f4a7c15 + uint64(i)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return uint32(x)
}

// bigInit fills a float32 backing with the big table of seed.
func bigInit(seed uint64) towers.Initializer {
	return func(_ *rand.Rand, _ tensor.Dtype, _ tensor.Shape, backing any) error {
		s := backing.([]float32)
		for i := range s {
			s[i] = math.Float32frombits(bigBits(seed, i))
		}
		return nil
	}
}

// bigStore returns a store holding the big table of seed and the global
// step.
func bigStore(t testing.TB, rows int, seed uint64) *towers.Store {
	t.Helper()
	s := towers.NewStore(towers.StoreConfig{})
	for _, spec := range []towers.VarSpec{
		{Name: bigName, Dtype: tensor.Float32, Shape: tensor.Shape{rows, bigDim}, Trainable: true, Init: bigInit(seed)},
		{Name: towers.GlobalStepName, Dtype: tensor.Int64, Shape: tensor.Shape{}},
	} {
		if _, _, err := s.GetOrCreate(spec); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// checkTable checks, bit for bit, that store's big table is the one of seed.
func checkTable(t *testing.T, store *towers.Store, seed uint64) {
	t.Helper()
	v, err := store.Lookup(bigName)
	if err != nil {
		t.Fatal(err)
	}
	got := v.Data().([]float32)
	if n := bigRows() * bigDim; len(got) != n {
		t.Fatalf("%s has %d elements, want %d", bigName, len(got), n)
	}
	bad := 0
	for i, x := range got {
		if want := bigBits(seed, i); math.Float32bits(x) != want {
			if bad++; bad <= 3 {
				t.Errorf("%s element %d (row %d) has bits %#08x, want %#08x", bigName, i, i/bigDim, math.Float32bits(x), want)
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d elements differ", bigName, bad)
	}
}

// allocated returns how many bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// bigFile returns the path of the big table's file in checkpoint ckpt.
func bigFile(t *testing.T, ckpt string) string {
	t.Helper()
	r, err := Read(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Manifest().Variables {
		if e.Name == bigName {
			return filepath.Join(ckpt, e.File)
		}
	}
	t.Fatalf("%s lacks %s", ckpt, bigName)
	return ""
}

// TestBigTable saves a 1M × 64 float32 table (256 MiB; 128K × 64 under the
// race detector) and restores it, bit for bit, into the store that holds
// it and into a fresh store, streaming: Save allocates far less than the
// table, Restore into an existing variable too, and Restore into a fresh
// store one table (the new variable), not two. NumPy reads the file; one
// corrupted byte in it is caught.
func TestBigTable(t *testing.T) {
	rows := bigRows()
	table := uint64(rows * bigDim * 4)
	const seed = 7
	dir := t.TempDir()
	store := bigStore(t, rows, seed)

	var ckpt string
	var err error
	if n := allocated(func() { ckpt, err = Save(dir, store, 1, 0) }); err != nil {
		t.Fatal(err)
	} else if n > table/8 {
		t.Errorf("Save of a %d-byte table allocated %d bytes, want at most %d (an eighth): it must stream the table", table, n, table/8)
	}
	file := bigFile(t, ckpt)
	r, err := Read(ckpt)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("RestoreIntoExisting", func(t *testing.T) {
		v, err := store.Lookup(bigName)
		if err != nil {
			t.Fatal(err)
		}
		clear(v.Data().([]float32))
		if n := allocated(func() { err = r.Restore(store) }); err != nil {
			t.Fatal(err)
		} else if n > table/8 {
			t.Errorf("Restore of a %d-byte table into its variable allocated %d bytes, want at most %d: it must decode into the variable", table, n, table/8)
		}
		checkTable(t, store, seed)
	})

	t.Run("Numpy", func(t *testing.T) {
		py := numpyPython(t)
		// Memory-mapped, hashed a block of rows at a time: NumPy parses
		// the header and lays the data out; the test holds no copy.
		script := `
import hashlib, sys
import numpy as np
a = np.load(sys.argv[1], mmap_mode="r", allow_pickle=False)
h = hashlib.sha256()
for i in range(0, a.shape[0], 4096):
    h.update(np.ascontiguousarray(a[i:i+4096]).tobytes())
print(a.dtype.str, list(a.shape), h.hexdigest())
`
		out, err := exec.Command(py, "-c", script, file).CombinedOutput()
		if err != nil {
			t.Fatalf("numpy: %v\n%s", err, out)
		}
		h := sha256.New()
		buf := make([]float32, 1<<16)
		for i := 0; i < rows*bigDim; i += len(buf) {
			for k := range buf {
				buf[k] = math.Float32frombits(bigBits(seed, i+k))
			}
			h.Write(asBytes(buf))
		}
		want := fmt.Sprintf("<f4 [%d, %d] %s", rows, bigDim, hex.EncodeToString(h.Sum(nil)))
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("numpy reads %s as %q, want %q", file, got, want)
		}
	})

	// Drop the first store before a fresh one takes a second table.
	store = nil
	runtime.GC()
	debug.FreeOSMemory()

	fresh := towers.NewStore(towers.StoreConfig{})
	t.Run("RestoreIntoFresh", func(t *testing.T) {
		if n := allocated(func() { err = r.Restore(fresh) }); err != nil {
			t.Fatal(err)
		} else if n > table+table/8 {
			t.Errorf("Restore of a %d-byte table into a fresh store allocated %d bytes, want at most %d: the new variable and no second copy", table, n, table+table/8)
		}
		checkTable(t, fresh, seed)
	})

	t.Run("CorruptedByte", func(t *testing.T) {
		f, err := os.OpenFile(file, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(table / 2)
		b := []byte{0}
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x10
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(ckpt); err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "corrupted") {
			t.Errorf("Read of a checkpoint with a corrupted byte = %v, want an error naming %s as corrupted", err, file)
		}
		// The reader verified the file before the damage: Restore,
		// decoding into the variable, checks it again.
		if err := r.Restore(fresh); err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "corrupted") {
			t.Errorf("Restore of a file corrupted after Read = %v, want an error naming %s as corrupted", err, file)
		}
		if err := r.Restore(towers.NewStore(towers.StoreConfig{})); err == nil || !strings.Contains(err.Error(), file) {
			t.Errorf("Restore into a fresh store of a file corrupted after Read = %v, want an error naming %s", err, file)
		}
	})
}

var figures = flag.Bool("checkpoint.figures", false, "TestBigTableFigures: print the save time and peak RSS of the big table")

// TestBigTableFigures prints, under -checkpoint.figures and without the race
// detector, what saving the 1M × 64 float32 table costs: the median time
// of Save against cp of the file it wrote (alone, and with an fsync of the
// copy, as Save makes its file durable) and os.WriteFile of the same bytes
// (interleaved), and the peak RSS of saving it and restoring it.
// Nothing is asserted:
//
//	go test -run '^TestBigTableFigures$' -count=1 -v ./estimator/checkpoint/ -checkpoint.figures
func TestBigTableFigures(t *testing.T) {
	if !*figures || raceEnabled {
		t.Skip("figures: run without -race, with -checkpoint.figures")
	}
	hwm := func() string {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return "?"
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmHWM:") {
				return strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))
			}
		}
		return "?"
	}
	resetHWM := func() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }
	rows := bigRows()
	table := rows * bigDim * 4
	dir := t.TempDir()
	runtime.GC()
	debug.FreeOSMemory()
	resetHWM()
	t.Logf("table %d × %d float32: %d MiB; peak RSS before: %s", rows, bigDim, table>>20, hwm())
	store := bigStore(t, rows, 3)
	t.Logf("peak RSS with the store: %s", hwm())
	v, err := store.Lookup(bigName)
	if err != nil {
		t.Fatal(err)
	}
	raw := asBytes(v.Data().([]float32))

	const runs = 7
	var save, cp, cpSync, write []time.Duration
	for i := range runs {
		t0 := time.Now()
		ckpt, err := Save(dir, store, int64(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		save = append(save, time.Since(t0))
		src := bigFile(t, ckpt)
		dst := filepath.Join(t.TempDir(), "copy.npy")
		t0 = time.Now()
		if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		cp = append(cp, time.Since(t0))
		os.Remove(dst)
		// Save makes its file durable: so does cp followed by an fsync.
		t0 = time.Now()
		if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		if f, err := os.Open(dst); err != nil {
			t.Fatal(err)
		} else if err := f.Sync(); err != nil {
			t.Fatal(err)
		} else {
			f.Close()
		}
		cpSync = append(cpSync, time.Since(t0))
		os.Remove(dst)
		t0 = time.Now()
		if err := os.WriteFile(dst, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		write = append(write, time.Since(t0))
		os.Remove(dst)
	}
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds()*1000, 'f', 0, 64) + " ms" }
	t.Logf("median of %d interleaved runs: Save %s, cp of its file %s, cp and fsync %s, os.WriteFile of the bytes %s: Save/cp %.2f×, Save/(cp+fsync) %.2f×, Save/WriteFile %.2f×",
		runs, ms(median(save)), ms(median(cp)), ms(median(cpSync)), ms(median(write)),
		median(save).Seconds()/median(cp).Seconds(), median(save).Seconds()/median(cpSync).Seconds(),
		median(save).Seconds()/median(write).Seconds())
	t.Logf("peak RSS after saving: %s", hwm())

	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	resetHWM()
	if err := r.Restore(store); err != nil {
		t.Fatal(err)
	}
	t.Logf("peak RSS of Restore into the store holding the table: %s", hwm())
	store, v, raw = nil, nil, nil
	runtime.GC()
	debug.FreeOSMemory()
	resetHWM()
	fresh := towers.NewStore(towers.StoreConfig{})
	if err := r.Restore(fresh); err != nil {
		t.Fatal(err)
	}
	t.Logf("peak RSS of Restore into a fresh store (the old one dropped): %s", hwm())
	runtime.KeepAlive(fresh)
}
