package dataset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/sharding"
)

// writeIDCSVs writes one CSV file per count, file f holding counts[f]
// rows "id,y": id 100·f+i and y 2·id.
func writeIDCSVs(t testing.TB, counts []int) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for f, n := range counts {
		var b strings.Builder
		for i := range n {
			id := 100*f + i
			fmt.Fprintf(&b, "%d,%d\n", id, 2*id)
		}
		path := filepath.Join(dir, fmt.Sprintf("part-%02d.csv", f))
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

var idCSV = &CSVOptions{NoHeader: true, Schema: Schema{{Name: "id", Kind: KindInt64}, {Name: "y", Kind: KindFloat}}}

var idCSVSpec = map[string]FeatureSpec{"id": {Dtype: tensor.Int64}, "y": {Dtype: tensor.Float64, Label: true}}

// batchData is a batch's features' and labels' values by name.
type batchData map[string]any

// readBatches reads every batch of one call of in.
func readBatches(in estimator.InputFn) ([]batchData, error) {
	var out []batchData
	for b, err := range in(context.Background()) {
		if err != nil {
			return out, err
		}
		d := batchData{}
		for k, v := range b.Features {
			d[k] = v.Data()
		}
		for k, v := range b.Labels {
			d["label "+k] = v.Data()
		}
		out = append(out, d)
	}
	return out, nil
}

// inputOf is p's input function.
func inputOf(t testing.TB, p Pipeline) estimator.InputFn {
	t.Helper()
	in, err := p.Input()
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// With Cache, a pipeline reads the batches it reads without, and a file
// read to its end is read from memory afterwards: a second call of the
// input function reads the same batches after its files are gone.
func TestPipelineCache(t *testing.T) {
	tfr := func(t *testing.T) Pipeline {
		files, _ := writeIDFiles(t, []int{9, 14, 5})
		return Pipeline{Files: files, Spec: idSpec, BatchSize: 6, Epochs: 3, ShuffleBuffer: 7, Seed: 11, CycleLength: 2, Workers: 2}
	}
	csv := func(t *testing.T) Pipeline {
		return Pipeline{Files: writeIDCSVs(t, []int{9, 14, 5}), CSV: idCSV, Spec: idCSVSpec, BatchSize: 6, Epochs: 3, ShuffleBuffer: 7, Seed: 11, CycleLength: 2, Workers: 2}
	}
	tests := []struct {
		name string
		p    func(t *testing.T) Pipeline
	}{
		{"TFRecord", tfr},
		{"CSV", csv},
		{"by file, rank 1 of 2", func(t *testing.T) Pipeline {
			p := tfr(t)
			p.Processes, p.Rank, p.Sharing = 2, 1, ShareFiles
			return p
		}},
		{"CSV in order", func(t *testing.T) Pipeline {
			p := csv(t)
			p.ShuffleBuffer, p.Epochs = 0, 2
			return p
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p(t)
			want, err := readBatches(inputOf(t, p))
			if err != nil {
				t.Fatal(err)
			}
			p.Cache = true
			in := inputOf(t, p)
			first, err := readBatches(in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, first); diff != "" {
				t.Errorf("with Cache (-without +with):\n%s", diff)
			}
			for _, f := range p.Files {
				if err := os.WriteFile(f, []byte("not the records\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			again, err := readBatches(in)
			if err != nil {
				t.Fatalf("second call, files overwritten: %v", err)
			}
			if diff := cmp.Diff(want, again); diff != "" {
				t.Errorf("second call, files overwritten (-first +second):\n%s", diff)
			}
		})
	}
}

// A read that stops before a file's end keeps nothing of it: the next
// call reads the file again.
func TestPipelineCacheKeepsOnlyWholeFiles(t *testing.T) {
	files, _ := writeIDFiles(t, []int{9, 14})
	in := inputOf(t, Pipeline{Files: files, Spec: idSpec, BatchSize: 2, Cache: true})
	for _, err := range in(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		break // one batch: neither file read to its end
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := readBatches(in); err == nil || !strings.Contains(err.Error(), files[0]) {
		t.Errorf("second call, files removed after a partial read: error %v, want one naming %s", err, files[0])
	}
}

// rowParser is a RowParser over a SpecParser: a row is the batch of one
// record; it counts the rows it prepares, fails on the record of id
// fail and panics on the record of id panicAt (-1: none); ParseRows
// clears the slice it is given once done with it, as it may.
type rowParser struct {
	spec          SpecParser
	prepared      *atomic.Int64
	fail, panicAt int64
}

func (p rowParser) Parse(examples []Example) (sharding.Batch, error) { return p.spec.Parse(examples) }

func (p rowParser) PrepareRow(ex Example) (any, error) {
	p.prepared.Add(1)
	switch ex["id"].Int64s[0] {
	case p.fail:
		return nil, &ParseError{Example: 0, Feature: "id", Err: errors.New("an id this parser refuses")}
	case p.panicAt:
		panic("a row this parser cannot take")
	}
	return p.spec.Parse([]Example{ex})
}

func (p rowParser) ParseRows(rows []any) (sharding.Batch, error) {
	var features, labels []map[string]*tensor.Dense
	for _, r := range rows {
		b := r.(sharding.Batch)
		features, labels = append(features, b.Features), append(labels, b.Labels)
	}
	f, err := sharding.ConcatMap(features)
	if err != nil {
		return sharding.Batch{}, err
	}
	l, err := sharding.ConcatMap(labels)
	clear(rows)
	return sharding.Batch{Features: f, Labels: l}, err
}

// With Cache, a RowParser prepares each record once, however many
// epochs read it, and the batches are Parse's; its errors and panics
// name the record and the parser.
func TestPipelineCacheRowParser(t *testing.T) {
	files, ids := writeIDFiles(t, []int{9, 14, 5})
	base := Pipeline{Files: files, Spec: idSpec, BatchSize: 6, Epochs: 4, ShuffleBuffer: 7, Seed: 11, CycleLength: 2, Workers: 2}
	want, err := readBatches(inputOf(t, base))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		fail, panicAt int64
		wantErr       []string
	}{
		{"rows", -1, -1, nil},
		{"a refused record", 103, -1, []string{files[1] + ": record 3", `feature "id"`, "refuses"}},
		{"a panic", -1, 204, []string{files[2] + ": record 4", "PrepareRow", "rowParser", "cannot take"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var prepared atomic.Int64
			p := base
			p.Spec, p.Cache = nil, true
			p.Parser = rowParser{spec: SpecParser(idSpec), prepared: &prepared, fail: tc.fail, panicAt: tc.panicAt}
			got, err := readBatches(inputOf(t, p))
			if tc.wantErr != nil {
				wanterr.Mentions(t, err, tc.wantErr...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("batches (-Parse +rows):\n%s", diff)
			}
			if n := prepared.Load(); n != int64(len(ids)) {
				t.Errorf("%d rows prepared over 4 epochs of %d records, want each once", n, len(ids))
			}
		})
	}
}

// A pipeline caching for a RowParser keeps each record's row in place of
// its data once made; with processes sharing by file, only its own files.
func TestPipelineCacheKeeps(t *testing.T) {
	files, _ := writeIDFiles(t, []int{9, 14, 5, 6})
	var prepared atomic.Int64
	p := Pipeline{Files: files, Parser: rowParser{spec: SpecParser(idSpec), prepared: &prepared, fail: -1, panicAt: -1},
		BatchSize: 4, Epochs: 2, ShuffleBuffer: 5, Seed: 3, Workers: 2, Cache: true, Processes: 2, Rank: 1, Sharing: ShareFiles}
	p.state = &pipelineState{}
	for _, err := range p.batches(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
	}
	plan, err := p.sharePlan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var cached []string
	for file, recs := range p.state.cache.files {
		cached = append(cached, file)
		for i, r := range recs {
			if r.ex != nil || r.raw != nil || r.prep == nil || r.prep.data.Load() != nil || r.prep.row.Load() == nil {
				t.Errorf("%s record %d: data %v %v, slot %v: want only its row", file, i, r.ex != nil, r.raw != nil, r.prep)
			}
		}
	}
	slices.Sort(cached)
	if diff := cmp.Diff(slices.Sorted(slices.Values(plan.files)), cached); diff != "" {
		t.Errorf("cached files (-this process's +cached):\n%s", diff)
	}
}
