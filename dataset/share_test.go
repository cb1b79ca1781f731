package dataset

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
)

// readRanks reads every rank's batches of p shared among processes.
func readRanks(t *testing.T, p Pipeline, processes int, counts []*PipelineCounts) [][]got {
	t.Helper()
	var out [][]got
	for rank := range processes {
		q := p
		q.Processes, q.Rank = processes, rank
		if counts != nil {
			q.Counts = counts[rank]
		}
		out = append(out, readPipeline(t, q, 0, -1))
	}
	return out
}

// Processes sharing by file read only their own files, take the same
// number of steps an epoch however unequal their shares, read every
// record at most once an epoch (exactly once when the shares are even),
// count what they leave out, and read the same batches whatever the
// number of parse workers.
func TestPipelineShareByFile(t *testing.T) {
	tests := []struct {
		name          string
		counts        []int
		processes     int
		batch         int
		drop          bool
		buffer, cycle int
		sharing       Sharing
		perEpoch      int   // batches an epoch, every process
		dropped       []int // each process's records an epoch leaves out
	}{
		{"even shares", []int{6, 6, 6, 6}, 2, 4, false, 5, 2, ShareAuto, 6, []int{0, 0}},
		{"even shares, no shuffle", []int{5, 3, 2, 6}, 2, 4, false, 0, 1, ShareFiles, 4, []int{0, 0}},
		{"uneven shares, last batch part", []int{9, 4, 6, 1, 7}, 2, 4, false, 6, 2, ShareAuto, 7, []int{0, 0}},
		{"uneven shares, drop remainder", []int{9, 4, 6, 1, 7}, 2, 4, true, 6, 2, ShareAuto, 6, []int{2, 1}},
		{"three processes, one small share", []int{10, 2, 5}, 3, 3, false, 4, 1, ShareAuto, 2, []int{8, 3, 0}},
		{"batch parts of 3 and 2", []int{7, 3, 11}, 2, 5, false, 3, 2, ShareFiles, 4, []int{0, 2}},
		{"batch parts of 3 and 2, drop remainder", []int{7, 3, 11}, 2, 5, true, 3, 2, ShareFiles, 3, []int{2, 4}},
	}
	const epochs = 3
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files, ids := writeIDFiles(t, tc.counts)
			p := Pipeline{Files: files, Spec: idSpec, BatchSize: tc.batch, DropRemainder: tc.drop, Epochs: epochs,
				ShuffleBuffer: tc.buffer, Seed: 5, CycleLength: tc.cycle, Sharing: tc.sharing}
			counts := make([]*PipelineCounts, tc.processes)
			for i := range counts {
				counts[i] = &PipelineCounts{}
			}
			ranks := readRanks(t, p, tc.processes, counts)
			for rank, batches := range ranks {
				if len(batches) != epochs*tc.perEpoch {
					t.Fatalf("process %d read %d batches, want %d epochs of %d", rank, len(batches), epochs, tc.perEpoch)
				}
				if got, want := counts[rank].Dropped(), int64(epochs*tc.dropped[rank]); got != want {
					t.Errorf("process %d: Dropped %d, want %d", rank, got, want)
				}
			}
			owner := map[int64]int{} // file -> the process that read it
			for e := range epochs {
				var all []int64
				dropped := 0
				for rank, batches := range ranks {
					for _, b := range batches[e*tc.perEpoch : (e+1)*tc.perEpoch] {
						for _, id := range b.IDs {
							if r, ok := owner[id/100]; ok && r != rank {
								t.Errorf("epoch %d: file %d read by processes %d and %d", e, id/100, r, rank)
							}
							owner[id/100] = rank
						}
						all = append(all, b.IDs...)
					}
					dropped += tc.dropped[rank]
				}
				seen := slices.Sorted(slices.Values(all))
				if len(slices.Compact(slices.Clone(seen))) != len(seen) {
					t.Errorf("epoch %d reads a record twice: %v", e, seen)
				}
				if len(seen)+dropped != len(ids) {
					t.Errorf("epoch %d reads %d records and leaves out %d, of %d", e, len(seen), dropped, len(ids))
				}
				if dropped == 0 {
					if diff := cmp.Diff(ids, seen); diff != "" {
						t.Errorf("epoch %d does not read every record once (-want +got):\n%s", e, diff)
					}
				}
			}
			if tc.buffer > 1 {
				for rank, batches := range ranks {
					orders := epochsOf(batches, tc.perEpoch)
					if slices.Equal(orders[0], orders[1]) {
						t.Errorf("process %d reads epochs 0 and 1 in the same order %v", rank, orders[0])
					}
				}
			}
			for _, w := range []struct{ workers, prefetch int }{{3, 0}, {2, 5}} {
				q := p
				q.Workers, q.Prefetch = w.workers, w.prefetch
				if diff := cmp.Diff(ranks, readRanks(t, q, tc.processes, nil)); diff != "" {
					t.Errorf("%d workers, prefetch %d: batches differ from one worker (-want +got):\n%s", w.workers, w.prefetch, diff)
				}
			}
		})
	}
}

// A process sharing by file, started at batch k, reads the batches an
// uninterrupted run reads from its k-th on.
func TestPipelineShareByFileResumes(t *testing.T) {
	files, _ := writeIDFiles(t, []int{9, 4, 6, 1, 7})
	for _, drop := range []bool{false, true} {
		for rank := range 2 {
			p := Pipeline{Files: files, Spec: idSpec, BatchSize: 4, DropRemainder: drop, Epochs: 3, ShuffleBuffer: 5, Seed: 3,
				CycleLength: 2, Workers: 2, Processes: 2, Rank: rank}
			all := readPipeline(t, p, 0, -1)
			for start := range len(all) + 2 {
				got := readPipeline(t, p, int64(start), -1)
				if diff := cmp.Diff(all[min(start, len(all)):], got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("drop %v, process %d, from batch %d (-uninterrupted +resumed):\n%s", drop, rank, start, diff)
				}
			}
			forever := p
			forever.Epochs = estimator.Forever
			ref := readPipeline(t, forever, 0, 40)
			if diff := cmp.Diff(ref[23:], readPipeline(t, forever, 23, 17)); diff != "" {
				t.Errorf("drop %v, process %d: forever, from batch 23 (-uninterrupted +resumed):\n%s", drop, rank, diff)
			}
		}
	}
}

func TestPipelineShareConfigErrors(t *testing.T) {
	files, _ := writeIDFiles(t, []int{2, 2})
	tests := []struct {
		name string
		p    Pipeline
		want string
	}{
		{"fewer files than processes", Pipeline{Files: files, Spec: idSpec, BatchSize: 3, Processes: 3, Sharing: ShareFiles}, "2 files cannot give each of 3 processes one"},
		{"no such sharing", Pipeline{Files: files, Spec: idSpec, BatchSize: 3, Sharing: Sharing(7)}, "sharing Sharing(7)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.p.Input()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// damage flips a data byte of each of records in the TFRecord file at
// path, so that their data checksums do not match.
func damage(t *testing.T, path string, records ...int64) {
	t.Helper()
	f, err := OpenRecords(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for {
		offsets = append(offsets, f.Offset())
		if _, err := f.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		data[offsets[r]+12] ^= 0xff // past the length and its checksum
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Damaged records skipped are counted per file (Counts) and logged, once
// a file by each process, not silently dropped; by-file sharing counts records as epochs
// read them, without the damaged ones.
func TestPipelineReportsSkippedRecords(t *testing.T) {
	files, ids := writeIDFiles(t, []int{5, 4, 6})
	damage(t, files[0], 1, 3)
	damage(t, files[2], 0)
	tests := []struct {
		name      string
		processes int
	}{
		{"one process", 1},
		{"processes sharing by file", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			counts := &PipelineCounts{}
			p := Pipeline{Files: files, Spec: idSpec, BatchSize: 3, Epochs: 2, ShuffleBuffer: 4, Seed: 1,
				Records: RecordOptions{SkipDamaged: true}, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Counts: counts}
			var read []int64
			for rank := range tc.processes {
				q := p
				q.Processes, q.Rank = tc.processes, rank
				for _, b := range readPipeline(t, q, 0, -1) {
					read = append(read, b.IDs...)
				}
			}
			want := map[string]int64{files[0]: 2, files[2]: 1}
			if diff := cmp.Diff(want, counts.Skipped()); diff != "" {
				t.Errorf("Skipped (-want +got):\n%s", diff)
			}
			for file, n := range want {
				line := fmt.Sprintf("file=%s records=%d", file, n)
				if c := strings.Count(logs.String(), line); c != tc.processes { // once by each process
					t.Errorf("log says %q %d times, want %d:\n%s", line, c, tc.processes, logs.String())
				}
			}
			if got, good := len(read), 2*(len(ids)-3); tc.processes == 1 && got != good {
				t.Errorf("read %d records in 2 epochs, want %d", got, good)
			}
			for _, id := range read {
				if id == 1 || id == 3 || id == 200 {
					t.Errorf("damaged record %d read", id)
				}
			}
		})
	}
}

// CSV files shared by file: each file read by one process, every row once
// an epoch across processes.
func TestPipelineShareCSVByFile(t *testing.T) {
	dir := t.TempDir()
	var files []string
	var want []int64
	for f, n := range []int{3, 5, 4, 4} {
		var b strings.Builder
		b.WriteString("id\n")
		for i := range n {
			id := int64(100*f + i)
			fmt.Fprintf(&b, "%d\n", id)
			want = append(want, id)
		}
		path := filepath.Join(dir, fmt.Sprintf("part-%d.csv", f))
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	p := Pipeline{Files: files, CSV: &CSVOptions{Schema: Schema{{Name: "id", Kind: KindInt64}}}, Spec: map[string]FeatureSpec{"id": {Dtype: tensor.Int64}},
		BatchSize: 2, ShuffleBuffer: 3, Seed: 4, Processes: 2, Sharing: ShareFiles}
	var got []int64
	steps := -1
	owner := map[int64]int{} // file -> the process that read it
	for rank := range 2 {
		q := p
		q.Rank = rank
		in, err := q.Input()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for b, err := range in(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range b.Features["id"].Data().([]int64) {
				if r, ok := owner[id/100]; ok && r != rank {
					t.Errorf("file %d read by processes %d and %d", id/100, r, rank)
				}
				owner[id/100] = rank
				got = append(got, id)
			}
			n++
		}
		if steps >= 0 && n != steps {
			t.Errorf("process %d read %d batches, process 0 %d", rank, n, steps)
		}
		steps = n
	}
	if diff := cmp.Diff(want, slices.Sorted(slices.Values(got))); diff != "" {
		t.Errorf("rows read (-want +got):\n%s", diff)
	}
}
