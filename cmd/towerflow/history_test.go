package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/towerflow/towerflow/internal/wanterr"
)

// TestPlotTornLastLine: a run killed while it wrote its history leaves a
// last line without its newline; plot skips it with a warning naming the
// file and the line, and draws the rest. The same line anywhere else is an
// error naming them.
func TestPlotTornLastLine(t *testing.T) {
	const torn = `{"step": 310, "lo`
	tests := []struct {
		name string
		// tail is written after the run's training history.
		tail string
		warn []string
		err  []string
	}{
		{"torn last line", torn, []string{"towerflow plot: warning: ", TrainHistoryFile + ":31:", "skipped the last line"}, nil},
		{"torn line then more", torn + "\n" + `{"step": 320, "loss": 0.1}` + "\n", nil, []string{TrainHistoryFile + ":31:", "unexpected EOF"}},
		{"line over the cap", `{"step": 320, "loss": 0.1, "x": "` + strings.Repeat("x", 2<<20) + "\"}\n", nil, []string{TrainHistoryFile + ":31:", "longer than 1048576 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			train, eval := trainingRun(300)
			writeHistory(t, dir, train, eval)
			path := filepath.Join(dir, TrainHistoryFile)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(tc.tail); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			err = plotHistory(io.Discard, &stderr, []string{"-o", filepath.Join(t.TempDir(), "out.png"), dir})
			if tc.err != nil {
				wanterr.Mentions(t, err, append(tc.err, path)...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(stderr.String(), "warning:"); got != 1 {
				t.Fatalf("%d warnings, want 1:\n%s", got, stderr.String())
			}
			for _, w := range append(tc.warn, path) {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("the warning %q does not mention %q", stderr.String(), w)
				}
			}
		})
	}
}
