package checkpoint

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/towers"
)

// The kill test saves a model of about 25 MB over and over in a child
// process, SIGKILLs it at varying moments, and checks after each kill that
// the model directory still holds a whole checkpoint with exactly the values
// of its step.

const (
	helperEnv  = "TOWERFLOW_CHECKPOINT_HELPER_DIR"
	killKeep   = 3
	killRounds = 20
)

var bigVars = []varDef{
	{"dense/w", tensor.Float32, []int{512, 4096}, true},         // 8 MiB
	{"dense/w/Adam/m", tensor.Float32, []int{512, 4096}, false}, // 8 MiB
	{"emb", tensor.Float64, []int{512, 1024}, true},             // 4 MiB
	{"dense/b", tensor.Float32, []int{4096}, true},
	{"counts", tensor.Int64, []int{64, 64}, false},
	{"global_step", tensor.Int64, []int{}, false},
}

// bigValue is element i of variable v at step: a deterministic function the
// parent recomputes, exact in every dtype used.
func bigValue(step int64, v, i int) float64 {
	return float64((step*7919+int64(v)*104729+int64(i))%2039) * 0.5
}

// fillBig sets every variable of store (holding bigVars) to its values at step.
func fillBig(store *towers.Store, step int64) error {
	for vi, d := range bigVars {
		v, err := store.Lookup(d.name)
		if err != nil {
			return err
		}
		switch s := v.Data().(type) {
		case []float32:
			for i := range s {
				s[i] = float32(bigValue(step, vi, i))
			}
		case []float64:
			for i := range s {
				s[i] = bigValue(step, vi, i)
			}
		case []int64:
			for i := range s {
				s[i] = int64(2 * bigValue(step, vi, i))
			}
			if d.name == "global_step" {
				s[0] = step
			}
		}
	}
	return nil
}

// checkBig checks that checkpoint r holds exactly the values of its step.
func checkBig(r *Reader) error {
	step := r.Step()
	if names := r.Names(); len(names) != len(bigVars) {
		return fmt.Errorf("%s: variables %q", r.Path(), names)
	}
	for vi, d := range bigVars {
		got, err := r.Tensor(d.name)
		if err != nil {
			return err
		}
		if got.Dtype() != d.dt || !got.Shape().Eq(tensor.Shape(d.shape)) {
			return fmt.Errorf("%s: %s: dtype %v shape %v", r.Path(), d.name, got.Dtype(), got.Shape())
		}
		data, _ := numeric.Slice(got)
		bad := -1
		switch s := data.(type) {
		case []float32:
			bad = firstBad(s, func(i int) float32 { return float32(bigValue(step, vi, i)) })
		case []float64:
			bad = firstBad(s, func(i int) float64 { return bigValue(step, vi, i) })
		case []int64:
			want := func(i int) int64 { return int64(2 * bigValue(step, vi, i)) }
			if d.name == "global_step" {
				want = func(int) int64 { return step }
			}
			bad = firstBad(s, want)
		}
		if bad >= 0 {
			return fmt.Errorf("%s (step %d): %s[%d] has a wrong value", r.Path(), step, d.name, bad)
		}
	}
	return nil
}

func firstBad[T comparable](s []T, want func(int) T) int {
	for i, x := range s {
		if x != want(i) {
			return i
		}
	}
	return -1
}

// TestHelperSaveLoop is the child of TestKillDuringSave: it resumes from the
// latest checkpoint of $TOWERFLOW_CHECKPOINT_HELPER_DIR and saves the next
// steps until it is killed.
func TestHelperSaveLoop(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process of TestKillDuringSave")
	}
	store := towers.NewStore(towers.StoreConfig{})
	for _, d := range bigVars {
		if _, _, err := store.GetOrCreate(towers.VarSpec{Name: d.name, Dtype: d.dt, Shape: tensor.Shape(d.shape), Trainable: d.trainable}); err != nil {
			t.Fatal(err)
		}
	}
	step := int64(1)
	// Resume after the latest checkpoint, like a restarted training job
	// (the values are a function of the step, so nothing is restored).
	if r, err := Read(dir); err == nil {
		step = r.Step() + 1
	}
	for end := step + 10000; step < end; step++ {
		if err := fillBig(store, step); err != nil {
			t.Fatal(err)
		}
		if _, err := Save(dir, store, step, killKeep); err != nil {
			t.Fatal(err)
		}
	}
}

// pointerStep returns the step of the latest checkpoint the pointer names,
// or -1.
func pointerStep(dir string) int64 {
	p, err := readPointer(dir)
	if err != nil {
		return -1
	}
	step, _ := parseName(p.Latest)
	return step
}

func hasTempDir(dir string) bool {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), tmpPrefix) {
			return true
		}
	}
	return false
}

func TestKillDuringSave(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test in -short mode")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(2024, 7))
	t0 := time.Now()
	deadline := t0.Add(90 * time.Second) // only against a hung child
	var last int64
	var killedInTemp, killedAfterPointer, killedAfterDelay int
	phase := map[string]int{} // what each kill left behind
	for round := range killRounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSaveLoop$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()

		// poll waits until cond holds, polling with a short backoff; the
		// child must not exit meanwhile.
		poll := func(what string, cond func() bool) {
			t.Helper()
			for backoff := 100 * time.Microsecond; !cond(); backoff = min(2*backoff, 5*time.Millisecond) {
				select {
				case err := <-exited:
					t.Fatalf("round %d: child exited (%v) before %s:\n%s", round, err, what, stderr.String())
				case <-time.After(backoff):
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("round %d: no %s before the deadline:\n%s", round, what, stderr.String())
				}
			}
		}
		// Wait for progress: a checkpoint newer than the last round's.
		poll("new checkpoint", func() bool { return pointerStep(dir) > last })
		// Then kill at a varying moment: while a checkpoint is being
		// written, right after a pointer update (while old checkpoints are
		// deleted or the next save starts), or after a random delay of up
		// to about two saves.
		switch round % 3 {
		case 0:
			poll("temporary directory", func() bool { return hasTempDir(dir) })
			for range rng.IntN(50) { // a few more stats to vary the point within the save
				hasTempDir(dir)
			}
			killedInTemp++
		case 1:
			seen := pointerStep(dir)
			poll("pointer update", func() bool { return pointerStep(dir) > seen })
			killedAfterPointer++
		case 2:
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
			killedAfterDelay++
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-exited; err == nil {
			t.Fatalf("round %d: child finished instead of being killed:\n%s", round, stderr.String())
		}

		phase[leftovers(dir)]++

		// The directory holds a whole checkpoint no older than before.
		r, err := Read(dir)
		if err != nil {
			t.Fatalf("round %d: after kill: %v", round, err)
		}
		if r.Step() <= last {
			t.Fatalf("round %d: latest step %d, the previous round saw %d", round, r.Step(), last)
		}
		if err := checkBig(r); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// Every checkpoint the pointer keeps is whole.
		p, err := readPointer(dir)
		if err != nil {
			t.Fatalf("round %d: pointer: %v", round, err)
		}
		if len(p.Checkpoints) > killKeep {
			t.Errorf("round %d: pointer keeps %d checkpoints, want at most %d", round, len(p.Checkpoints), killKeep)
		}
		for _, c := range p.Checkpoints {
			if _, err := open(filepath.Join(dir, c)); err != nil {
				t.Errorf("round %d: kept checkpoint: %v", round, err)
			}
		}
		last = r.Step()
	}
	t.Logf("%d kills (%d once a temporary directory existed, %d after a pointer update, %d after a random delay) in %v; reached step %d; the kills left: %v",
		killRounds, killedInTemp, killedAfterPointer, killedAfterDelay, time.Since(t0).Round(time.Millisecond), last, phase)
}

// leftovers describes what a killed Save left in dir, which tells roughly
// where it was killed.
func leftovers(dir string) string {
	des, _ := os.ReadDir(dir)
	p, _ := readPointer(dir)
	var what []string
	ckpts := 0
	for _, de := range des {
		n := de.Name()
		switch {
		case strings.HasPrefix(n, tmpPrefix):
			what = append(what, "temp dir")
		case strings.HasPrefix(n, ".checkpoint-"):
			what = append(what, "pointer temp file")
		case ckptRe.MatchString(n):
			ckpts++
		}
	}
	if ckpts > len(p.Checkpoints) {
		what = append(what, "unpointed ckpt dir")
	}
	if len(what) == 0 {
		return "nothing"
	}
	return strings.Join(what, "+")
}
