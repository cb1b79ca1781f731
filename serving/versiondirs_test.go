package serving

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
)

// TestVersionDirs serves a base directory with directories that are not
// versions ("0999", "+999": ignored, logged once) and versions that do
// not load: the newest version that loads is served, each failure shows
// in the status as END with its error and in the log, and is not tried
// again; a newer good version is still picked up.
func TestVersionDirs(t *testing.T) {
	ctx := context.Background()
	model := linregModel()
	est, err := estimator.New(model, estimator.RunConfig{LogEvery: -1, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	base := t.TempDir()
	input := estimator.ServingInput{"x": {Dtype: tensor.Float64, Shape: []int{1}}}
	export := func() string {
		t.Helper()
		dir, err := est.Export(ctx, base, input, estimator.AllowUntrained())
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Base(dir)
	}
	copyVersion := func(from, to string) {
		t.Helper()
		if err := os.CopyFS(filepath.Join(base, to), os.DirFS(filepath.Join(base, from))); err != nil {
			t.Fatal(err)
		}
	}
	breakVersion := func(name string) { // a file that no longer matches its manifest
		t.Helper()
		f, err := os.OpenFile(filepath.Join(base, name, "signatures.json"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(" ")
		f.Close()
	}

	if v := export(); v != "1" {
		t.Fatalf("first export %s", v)
	}
	copyVersion("1", "0999")
	copyVersion("1", "+999")
	copyVersion("1", "5")
	breakVersion("5")
	var logs syncBuffer
	s, hs := newTestServer(t, []ModelConfig{{Name: "m", BaseDir: base, Model: model}},
		Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	states := func() []string {
		t.Helper()
		var out []string
		for _, line := range statusOf(t, do(t, hs, "GET", "/v1/models/m", "")) {
			out = append(out, strings.SplitN(line, ":", 2)[0]) // the state, and that there is an error
			if strings.Contains(line, "UNKNOWN") && !strings.Contains(line, "signatures.json") {
				t.Errorf("status %q does not name the file that failed", line)
			}
		}
		return out
	}
	if diff := cmp.Diff([]string{"5 END", "1 AVAILABLE"}, states()); diff != "" {
		t.Errorf("status at start (-want +got):\n%s", diff)
	}
	if got := predictions(t, do(t, hs, "POST", "/v1/models/m:predict", instances(1))); len(got) != 1 {
		t.Errorf("predictions %v", got)
	}

	if err := s.Reload(); err != nil { // nothing new; version 5 is not tried again
		t.Errorf("reload: %v", err)
	}
	if v := export(); v != "6" {
		t.Fatalf("export after version 5: %s", v)
	}
	if err := s.Reload(); err != nil {
		t.Errorf("reload: %v", err)
	}
	copyVersion("6", "7")
	breakVersion("7")
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "version 7") {
		t.Errorf("reload with a broken version 7: %v, want an error naming it", err)
	}
	s.drains.Wait() // version 1, replaced by 6, is closed in the background
	if diff := cmp.Diff([]string{"7 END", "6 AVAILABLE", "5 END", "1 END"}, states()); diff != "" {
		t.Errorf("status after reloads (-want +got):\n%s", diff)
	}
	log := logs.String()
	for _, name := range []string{"0999", "+999"} {
		if n := strings.Count(log, filepath.Join(base, name)); n != 1 {
			t.Errorf("directory %s logged %d times, want once:\n%s", name, n, log)
		}
	}
	for _, v := range []string{"version 5", "version 7"} {
		if n := strings.Count(log, v+":"); n != 1 {
			t.Errorf("%s's failure logged %d times, want once:\n%s", v, n, log)
		}
	}
}
