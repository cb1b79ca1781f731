package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/sharding"
)

// writeIDFiles writes one TFRecord file per count, file f holding counts[f]
// records: "id" 100·f+i, "x" [id, -id] and label "y" 2·id. It returns the
// files' paths in order and every id.
func writeIDFiles(t testing.TB, counts []int) ([]string, []int64) {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	var ids []int64
	for f, n := range counts {
		path := filepath.Join(dir, fmt.Sprintf("part-%02d.tfrecord", f))
		w, err := CreateRecords(path, "")
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			id := int64(100*f + i)
			ids = append(ids, id)
			ex := Example{"id": {Int64s: []int64{id}}, "x": {Floats: []float32{float32(id), -float32(id)}}, "y": {Floats: []float32{2 * float32(id)}}}
			if err := w.WriteExample(ex); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths, ids
}

var idSpec = map[string]FeatureSpec{
	"id": {Dtype: tensor.Int64},
	"x":  {Dtype: tensor.Float32, Shape: []int{2}},
	"y":  {Dtype: tensor.Float64, Label: true},
}

// got is one batch: its ids, x and y.
type got struct {
	IDs []int64
	X   []float32
	Y   []float64
}

func gotOf(t testing.TB, b sharding.Batch) got {
	t.Helper()
	return got{b.Features["id"].Data().([]int64), b.Features["x"].Data().([]float32), b.Labels["y"].Data().([]float64)}
}

// readPipeline reads every batch of p from batch start on (at most max).
func readPipeline(t testing.TB, p Pipeline, start int64, limit int) []got {
	t.Helper()
	in, err := p.Input()
	if err != nil {
		t.Fatal(err)
	}
	var out []got
	for b, err := range in(estimator.WithStartBatch(context.Background(), start)) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, gotOf(t, b))
		if len(out) == limit {
			break
		}
	}
	return out
}

// epochsOf splits batches into epochs of perEpoch batches, each epoch the
// ids in the order read.
func epochsOf(batches []got, perEpoch int) [][]int64 {
	var out [][]int64
	for i, b := range batches {
		if i%perEpoch == 0 {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], b.IDs...)
	}
	return out
}

func TestPipelineEpochs(t *testing.T) {
	tests := []struct {
		name          string
		counts        []int
		batch         int
		drop          bool
		buffer, cycle int
		workers       int
	}{
		{"one file, no shuffle", []int{10}, 3, false, 0, 0, 1},
		{"one file, shuffled", []int{25}, 4, false, 8, 0, 2},
		{"files interleaved, shuffled", []int{7, 3, 11, 1}, 5, false, 6, 2, 3},
		{"buffer larger than the data", []int{4, 5}, 2, false, 100, 3, 2},
		{"drop remainder", []int{7, 3, 11}, 4, true, 5, 2, 2},
		{"drop remainder, no shuffle", []int{7, 6}, 5, true, 0, 1, 1},
	}
	const epochs = 4
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files, ids := writeIDFiles(t, tc.counts)
			p := Pipeline{Files: files, Spec: idSpec, BatchSize: tc.batch, DropRemainder: tc.drop, Epochs: epochs,
				ShuffleBuffer: tc.buffer, Seed: 7, CycleLength: tc.cycle, Workers: tc.workers}
			batches := readPipeline(t, p, 0, -1)
			perEpoch := (len(ids) + tc.batch - 1) / tc.batch
			if tc.drop {
				perEpoch = len(ids) / tc.batch
			}
			if len(batches) != epochs*perEpoch {
				t.Fatalf("%d batches, want %d epochs of %d", len(batches), epochs, perEpoch)
			}
			for i, b := range batches {
				want := tc.batch
				if !tc.drop && i%perEpoch == perEpoch-1 && len(ids)%tc.batch != 0 {
					want = len(ids) % tc.batch
				}
				if len(b.IDs) != want {
					t.Errorf("batch %d has %d records, want %d", i, len(b.IDs), want)
				}
				for j, id := range b.IDs {
					if b.X[2*j] != float32(id) || b.X[2*j+1] != -float32(id) || b.Y[j] != 2*float64(id) {
						t.Errorf("batch %d row %d: id %d with x %v, y %v", i, j, id, b.X[2*j:2*j+2], b.Y[j])
					}
				}
			}
			orders := epochsOf(batches, perEpoch)
			for e, order := range orders {
				seen := slices.Sorted(slices.Values(order))
				if tc.drop {
					if len(slices.Compact(slices.Clone(seen))) != len(seen) || len(seen) != perEpoch*tc.batch {
						t.Errorf("epoch %d: ids %v repeat, or are not %d", e, seen, perEpoch*tc.batch)
					}
					continue
				}
				if diff := cmp.Diff(ids, seen); diff != "" {
					t.Errorf("epoch %d does not read every record once (-want +got):\n%s", e, diff)
				}
			}
			if tc.buffer > 1 {
				for e := 1; e < len(orders); e++ {
					if slices.Equal(orders[e], orders[e-1]) {
						t.Errorf("epochs %d and %d read the same order %v", e-1, e, orders[e])
					}
				}
				if len(tc.counts) == 1 {
					// tf.data's buffer: the k-th record out is one of the
					// first buffer+k records read.
					for e, order := range orders {
						for k, id := range order {
							if int(id) >= tc.buffer+k {
								t.Errorf("epoch %d: record %d out is record %d read, past the buffer of %d", e, k, id, tc.buffer)
							}
						}
					}
				}
				if slices.Equal(orders[0], ids[:len(orders[0])]) {
					t.Errorf("epoch 0 is not shuffled: %v", orders[0])
				}
			} else if !tc.drop && tc.cycle <= 1 {
				for e, order := range orders {
					if diff := cmp.Diff(ids, order); diff != "" {
						t.Errorf("epoch %d unshuffled is not the files in order (-want +got):\n%s", e, diff)
					}
				}
			}
		})
	}
}

func TestPipelineInterleave(t *testing.T) {
	tests := []struct {
		counts []int
		cycle  int
		want   []int64
	}{
		{[]int{3, 2, 1}, 1, []int64{0, 1, 2, 100, 101, 200}},
		{[]int{3, 2, 1}, 2, []int64{0, 100, 1, 101, 2, 200}},
		{[]int{3, 2, 1}, 3, []int64{0, 100, 200, 1, 101, 2}},
		{[]int{1, 3, 2}, 2, []int64{0, 100, 200, 101, 201, 102}},
		{[]int{2, 2}, 5, []int64{0, 100, 1, 101}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.counts, tc.cycle), func(t *testing.T) {
			files, _ := writeIDFiles(t, tc.counts)
			batches := readPipeline(t, Pipeline{Files: files, Spec: idSpec, BatchSize: 100, CycleLength: tc.cycle}, 0, -1)
			if len(batches) != 1 {
				t.Fatalf("%d batches, want 1", len(batches))
			}
			if diff := cmp.Diff(tc.want, batches[0].IDs); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

// The same seed gives the same batches whatever the number of parse
// workers, and the parts of processes sharing by record, concatenated in
// rank order, are the batches of one process.
func TestPipelineSameBatchesWhateverWorkersAndProcesses(t *testing.T) {
	files, _ := writeIDFiles(t, []int{9, 14, 5})
	base := Pipeline{Files: files, Spec: idSpec, BatchSize: 6, Epochs: 3, ShuffleBuffer: 7, Seed: 11, CycleLength: 2}
	want := readPipeline(t, base, 0, -1)
	tests := []struct {
		workers, prefetch, processes int
		sharing                      Sharing
	}{
		{1, 1, 1, ShareAuto}, {2, 0, 1, ShareAuto}, {4, 8, 1, ShareAuto}, {1, 0, 2, ShareRecords}, {3, 2, 3, ShareRecords},
		{2, 1, 4, ShareAuto}, // fewer files than processes
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d workers, prefetch %d, %d processes, %v", tc.workers, tc.prefetch, tc.processes, tc.sharing), func(t *testing.T) {
			var parts [][]got
			for rank := range max(tc.processes, 1) {
				p := base
				p.Workers, p.Prefetch, p.Processes, p.Rank, p.Sharing = tc.workers, tc.prefetch, tc.processes, rank, tc.sharing
				parts = append(parts, readPipeline(t, p, 0, -1))
			}
			var joined []got
			for i := range parts[0] {
				var b got
				for rank, part := range parts {
					if len(part) != len(parts[0]) {
						t.Fatalf("process %d read %d batches, process 0 %d", rank, len(part), len(parts[0]))
					}
					if len(part[i].IDs) == 0 {
						t.Errorf("process %d has no rows of batch %d", rank, i)
					}
					b.IDs = append(b.IDs, part[i].IDs...)
					b.X = append(b.X, part[i].X...)
					b.Y = append(b.Y, part[i].Y...)
				}
				joined = append(joined, b)
			}
			if diff := cmp.Diff(want, joined); diff != "" {
				t.Errorf("batches differ from one process with one worker (-want +got):\n%s", diff)
			}
		})
	}
}

// Starting at batch k (estimator.StartBatch) reads the batches an
// uninterrupted run reads from its k-th on, whatever the epoch.
func TestPipelineResumesAtStartBatch(t *testing.T) {
	files, _ := writeIDFiles(t, []int{9, 4, 6})
	for _, drop := range []bool{false, true} {
		p := Pipeline{Files: files, Spec: idSpec, BatchSize: 4, DropRemainder: drop, Epochs: 4, ShuffleBuffer: 5, Seed: 3, CycleLength: 2, Workers: 2}
		all := readPipeline(t, p, 0, -1)
		for start := range len(all) + 2 {
			t.Run(fmt.Sprintf("drop %v, batch %d", drop, start), func(t *testing.T) {
				got := readPipeline(t, p, int64(start), -1)
				if diff := cmp.Diff(all[min(start, len(all)):], got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("from batch %d (-uninterrupted +resumed):\n%s", start, diff)
				}
			})
		}
		forever := p
		forever.Epochs = estimator.Forever
		ref := readPipeline(t, forever, 0, 40)
		if diff := cmp.Diff(ref[31:], readPipeline(t, forever, 31, 9)); diff != "" {
			t.Errorf("drop %v: forever, from batch 31 (-uninterrupted +resumed):\n%s", drop, diff)
		}
	}
}

func TestPipelineErrorsNameFileAndRecord(t *testing.T) {
	dir := t.TempDir()
	good, _ := writeIDFiles(t, []int{3})
	bad := filepath.Join(dir, "bad.tfrecord")
	w, err := CreateRecords(bad, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		ex := Example{"id": {Int64s: []int64{int64(i)}}, "x": {Floats: []float32{1, 2}}, "y": {Floats: []float32{3}}}
		if i == 2 {
			ex["x"] = Feature{Floats: []float32{1, 2, 3}}
		}
		if err := w.WriteExample(ex); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	garbled := filepath.Join(dir, "garbled.tfrecord")
	w, err = CreateRecords(garbled, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{nil, {0x0a, 0x05, 0x0a, 0x03}} { // an empty Example, then one cut short
		if err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	csvPath := filepath.Join(dir, "rows.csv")
	if err := os.WriteFile(csvPath, []byte("id,v\n1,0.5\n2,x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	goodCSV := filepath.Join(dir, "good.csv")
	if err := os.WriteFile(goodCSV, []byte("id,v\n1,0.5\n2,0.25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	csvSchema := Schema{{Name: "id", Kind: KindInt64}, {Name: "v", Kind: KindFloat}}
	csvSpec := map[string]FeatureSpec{"id": {Dtype: tensor.Int64}, "v": {Dtype: tensor.Float32}}
	wideSpec := map[string]FeatureSpec{"id": {Dtype: tensor.Int64}, "v": {Dtype: tensor.Float32, Shape: []int{2}}}
	tests := []struct {
		name string
		p    Pipeline
		want []string
	}{
		{"a feature of the wrong length", Pipeline{Files: []string{good[0], bad}, Spec: idSpec, BatchSize: 10},
			[]string{bad + ": record 2", `feature "x"`, "3 values"}},
		{"a record that is no tf.Example", Pipeline{Files: []string{garbled}, Spec: idSpec, BatchSize: 10, Workers: 2},
			[]string{garbled + ": record 1 at byte 16", "malformed"}},
		{"a CSV value of the wrong kind", Pipeline{Files: []string{csvPath}, CSV: &CSVOptions{Schema: csvSchema}, Spec: csvSpec, BatchSize: 10},
			[]string{csvPath + ":3", `column "v" (2)`}},
		{"a CSV column the spec wants wider", Pipeline{Files: []string{goodCSV}, CSV: &CSVOptions{Schema: csvSchema, Columns: []string{"id", "v"}}, Spec: wideSpec, BatchSize: 10},
			[]string{goodCSV + ":2", `feature "v"`}},
		{"shuffled, a feature of the wrong length", Pipeline{Files: []string{bad}, Spec: idSpec, BatchSize: 1, ShuffleBuffer: 4, Seed: 1, Workers: 3},
			[]string{bad + ": record 2", `feature "x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wanterr.Mentions(t, lastInputError(t, tc.p), tc.want...)
		})
	}
}

func TestPipelineConfigErrors(t *testing.T) {
	files, _ := writeIDFiles(t, []int{2})
	tests := []struct {
		name string
		p    Pipeline
		want string
	}{
		{"no files", Pipeline{Spec: idSpec, BatchSize: 1}, "no files"},
		{"no spec", Pipeline{Files: files, BatchSize: 1}, "no feature spec"},
		{"no batch size", Pipeline{Files: files, Spec: idSpec}, "batch size 0"},
		{"bad epochs", Pipeline{Files: files, Spec: idSpec, BatchSize: 1, Epochs: -2}, "epochs -2"},
		{"bad rank", Pipeline{Files: files, Spec: idSpec, BatchSize: 4, Processes: 2, Rank: 2}, "rank 2 of 2"},
		{"batch smaller than processes", Pipeline{Files: files, Spec: idSpec, BatchSize: 2, Processes: 3}, "each of 3 processes"},
		{"bad spec", Pipeline{Files: files, Spec: map[string]FeatureSpec{"s": {Dtype: tensor.String, Label: true, VarLen: true}}, BatchSize: 1}, `feature "s"`},
		{"bad CSV options", Pipeline{Files: files, CSV: &CSVOptions{}, Spec: idSpec, BatchSize: 1}, "pipeline"},
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

// A consumer that stops early, or a context cancelled, ends the reader
// and the workers (the race detector and the test's end see leaks as
// hangs otherwise).
func TestPipelineStops(t *testing.T) {
	files, _ := writeIDFiles(t, []int{50})
	in, err := Pipeline{Files: files, Spec: idSpec, BatchSize: 2, Epochs: estimator.Forever, ShuffleBuffer: 10, Workers: 3, Prefetch: 4}.Input()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range in(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 30 {
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last error
	n = 0
	for _, err := range in(ctx) {
		if last = err; err != nil {
			break
		}
		if n++; n == 3 {
			cancel()
		}
	}
	if last != context.Canceled {
		t.Errorf("after cancel: error %v, want context.Canceled", last)
	}
}

func TestRecordReaderExamples(t *testing.T) {
	files, ids := writeIDFiles(t, []int{5})
	f, err := OpenRecords(files[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var src Source = f.Examples()
	var got []int64
	for {
		ex, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ex["id"].Int64s...)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}

// lastInputError reads p's input to its end and returns the last error it
// gave (nil if none).
func lastInputError(t *testing.T, p Pipeline) error {
	t.Helper()
	in, err := p.Input()
	if err != nil {
		t.Fatal(err)
	}
	var last error
	for _, err := range in(context.Background()) {
		last = err
	}
	return last
}

// A pipeline whose files make no batch at all is an error wrapping
// estimator.ErrNoBatches in the place of its first batch, naming the
// files, whatever its epochs: no records, too few for a batch it keeps,
// or a share by file too small for a process's rows of a batch.
func TestPipelineWithoutBatches(t *testing.T) {
	empty, _ := writeIDFiles(t, []int{0, 0})
	two, _ := writeIDFiles(t, []int{2})
	ones, _ := writeIDFiles(t, []int{1, 1})
	twos, _ := writeIDFiles(t, []int{2, 2})
	emptyAndFull, _ := writeIDFiles(t, []int{0, 6})
	dir := t.TempDir()
	header := filepath.Join(dir, "header.csv")
	if err := os.WriteFile(header, []byte("id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	csv := &CSVOptions{Schema: Schema{{Name: "id", Kind: KindInt64}}}
	for _, tc := range []struct {
		name string
		p    Pipeline
		want []string
	}{
		{"empty files", Pipeline{Files: empty, Spec: idSpec, BatchSize: 2}, []string{"the files hold no records: " + empty[0] + ", " + empty[1]}},
		{"empty files, forever", Pipeline{Files: empty, Spec: idSpec, BatchSize: 2, Epochs: estimator.Forever}, []string{"the files hold no records"}},
		{"a CSV file of a header alone", Pipeline{Files: []string{header}, CSV: csv, Spec: map[string]FeatureSpec{"id": {Dtype: tensor.Int64}}, BatchSize: 2}, []string{"the files hold no records: " + header}},
		{"fewer records than a batch kept", Pipeline{Files: two, Spec: idSpec, BatchSize: 3, DropRemainder: true}, []string{"the files' 2 records are fewer than a batch of 3, and DropRemainder drops them", two[0]}},
		{"damaged records skipped", Pipeline{Files: empty, Spec: idSpec, BatchSize: 2, Records: RecordOptions{SkipDamaged: true}}, []string{"the files hold no records (not counting damaged records skipped"}},
		{"shares too small", Pipeline{Files: ones, Spec: idSpec, BatchSize: 4, DropRemainder: true, Processes: 2, Rank: 1, Sharing: ShareFiles},
			[]string{"shared by file among 2 processes, process 0's share of the files holds 1 records, fewer than its 2 rows of a batch", "ShareRecords"}},
		{"uneven parts of a batch", Pipeline{Files: twos, Spec: idSpec, BatchSize: 5, DropRemainder: true, Processes: 2, Rank: 1, Sharing: ShareFiles},
			[]string{"process 0's share of the files holds 2 records, fewer than its 3 rows of a batch"}},
		{"an empty share", Pipeline{Files: emptyAndFull, Spec: idSpec, BatchSize: 2, Processes: 2, Rank: 1, Sharing: ShareFiles},
			[]string{"process 1's share of the files holds no records"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := tc.p.Input()
			if err != nil {
				t.Fatal(err)
			}
			var got []error
			for _, err := range in(context.Background()) {
				got = append(got, err)
			}
			if len(got) != 1 || !errors.Is(got[0], estimator.ErrNoBatches) {
				t.Fatalf("the input yielded %v, want one error wrapping estimator.ErrNoBatches", got)
			}
			wanterr.Mentions(t, got[0], append([]string{"dataset: pipeline: input yielded no batches"}, tc.want...)...)
		})
	}
}

// A pipeline of CSV files whose parser reads a feature (labels aside)
// that no column read has is an error naming it and the columns.
func TestPipelineCSVFeatures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(path, []byte("id,v,y\n1,0.5,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	schema := Schema{{Name: "id", Kind: KindInt64}, {Name: "v", Kind: KindFloat}, {Name: "y", Kind: KindInt64}}
	for _, tc := range []struct {
		name    string
		spec    map[string]FeatureSpec
		columns []string // CSVOptions.Columns
		want    []string // what the error says; none: no error
	}{
		{"all there", map[string]FeatureSpec{"id": {Dtype: tensor.Int64}, "y": {Dtype: tensor.Int64, Label: true}}, nil, nil},
		{"a label not read", map[string]FeatureSpec{"id": {Dtype: tensor.Int64}, "y": {Dtype: tensor.Int64, Label: true}}, []string{"id"}, nil},
		{"misspelled", map[string]FeatureSpec{"idd": {Dtype: tensor.Int64}}, nil, []string{`the parser reads feature "idd", which the CSV columns read do not include (they are: id, v, y)`}},
		{"one with a default", map[string]FeatureSpec{"w": {Dtype: tensor.Float32, Default: Feature{Floats: []float32{1}}}, "id": {Dtype: tensor.Int64}}, nil, nil},
		{"two", map[string]FeatureSpec{"x": {Dtype: tensor.Float32}, "z": {Dtype: tensor.Float32}}, nil, []string{`features "x", "z", which`}},
		{"a column not read", map[string]FeatureSpec{"v": {Dtype: tensor.Float32}}, []string{"id", "y"}, []string{`feature "v"`, "(they are: id, y)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Pipeline{Files: []string{path}, CSV: &CSVOptions{Schema: schema, Columns: tc.columns}, Spec: tc.spec, BatchSize: 1}.Input()
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wanterr.Mentions(t, err, tc.want...)
		})
	}
}
