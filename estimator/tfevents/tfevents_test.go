package tfevents_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/towerflow/towerflow/estimator/tfevents"
	"github.com/towerflow/towerflow/internal/pyevents"
)

// written are the events TestPython and TestReadFile write after the file
// version: steps at the edges of int64's varint encoding, scalars at the
// edges of float32, tags a writer could get wrong.
var written = []tfevents.Event{
	{WallTime: 1.7e9 + 0.25, Step: 1, Scalars: []tfevents.Scalar{{"loss", 0.5}}},
	{WallTime: 1.7e9 + 1, Step: 0, Scalars: []tfevents.Scalar{{"zero", 0}, {"", -1.5}}},
	{WallTime: 1.7e9 + 2, Step: 1 << 40, Scalars: []tfevents.Scalar{{"global_step/sec", 11276.687973592701}, {"examples/sec", 0.1}}},
	{WallTime: 1.7e9 + 3, Step: -1, Scalars: []tfevents.Scalar{{"métrique ✓", 3.4e38}, {"tiny", 1e-40}}},
	{WallTime: 1.7e9 + 4, Step: math.MaxInt64, Scalars: []tfevents.Scalar{{"nan", math.NaN()}, {"inf", math.Inf(1)}, {"-inf", math.Inf(-1)}}},
	{WallTime: 1.7e9 + 5, Step: 7},
}

// float32s is what a scalar reads back as: its float32 value.
func float32s(events []tfevents.Event) []tfevents.Event {
	out := make([]tfevents.Event, len(events))
	for i, e := range events {
		out[i] = e
		out[i].Scalars = nil
		for _, s := range e.Scalars {
			out[i].Scalars = append(out[i].Scalars, tfevents.Scalar{Tag: s.Tag, Value: float64(float32(s.Value))})
		}
	}
	return out
}

// writeFile writes the file version and events into a new file in a
// temporary directory.
func writeFile(t *testing.T, events []tfevents.Event) string {
	t.Helper()
	w, err := tfevents.Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

// TestPython reads a file back with Python's protobuf runtime, which shares
// no code with the writer: framing, checksums and field numbers must be
// TensorFlow's.
func TestPython(t *testing.T) {
	py := pyevents.Python(t)
	path := writeFile(t, written)
	files, err := pyevents.Read(py, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("python read %d files, want 1", len(files))
	}
	var got []tfevents.Event
	for i, e := range files[0].Events {
		if i == 0 {
			if e.What != "file_version" || e.FileVersion != tfevents.FileVersion || e.WallTime <= 0 {
				t.Errorf("first event %+v, want a wall time and file_version %q", e, tfevents.FileVersion)
			}
			continue
		}
		g := tfevents.Event{WallTime: e.WallTime, Step: e.Step}
		if want := "summary"; len(e.Summary) > 0 && e.What != want {
			t.Errorf("event %d: %q set, want %q", i, e.What, want)
		}
		for _, v := range e.Summary {
			if v.Kind != "simple_value" {
				t.Errorf("event %d: value %q holds %q, want simple_value", i, v.Tag, v.Kind)
			}
			g.Scalars = append(g.Scalars, tfevents.Scalar{Tag: v.Tag, Value: float64(v.SimpleValue)})
		}
		got = append(got, g)
	}
	if diff := cmp.Diff(float32s(written), got, cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("python read (-want +got):\n%s", diff)
	}
}

// TestReadFile reads a file back with the package's own reader.
func TestReadFile(t *testing.T) {
	path := writeFile(t, written)
	got, err := tfevents.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].FileVersion != tfevents.FileVersion || got[0].WallTime <= 0 || got[0].Scalars != nil {
		t.Fatalf("first event %+v, want only the file version %q and a wall time", got, tfevents.FileVersion)
	}
	if diff := cmp.Diff(float32s(written), got[1:], cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestCreate: names as TensorFlow's, never overwriting another writer's
// file started in the same second; a file is whole once created.
func TestCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "eval")
	var paths []string
	for range 3 {
		w, err := tfevents.Create(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		paths = append(paths, w.Path())
	}
	name := regexp.MustCompile(`^events\.out\.tfevents\.\d{10}\.[^/]+$`)
	seen := map[string]bool{}
	for _, p := range paths {
		if filepath.Dir(p) != dir || !name.MatchString(filepath.Base(p)) {
			t.Errorf("event file %q: want %s/events.out.tfevents.<10 digits>.<host>[.<n>]", p, dir)
		}
		if seen[p] {
			t.Errorf("two writers got %q", p)
		}
		seen[p] = true
		events, err := tfevents.ReadFile(p) // before Close: the version is flushed
		if err != nil || len(events) != 1 || events[0].FileVersion != tfevents.FileVersion {
			t.Errorf("fresh file %s: %+v, %v; want the file version alone", p, events, err)
		}
	}
	files, err := tfevents.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Errorf("Files: %q, want 3", files)
	}
}

func TestCreateErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tfevents.Create(filepath.Join(file, "eval")); err == nil {
		t.Error("Create under a regular file: no error")
	}
	w, err := tfevents.Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteScalars(1, tfevents.Scalar{Tag: "loss", Value: 1}); !errors.Is(err, tfevents.ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
}
