package dataset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/sharding"
)

// sumParser parses the id files' records as idSpec does, but computes x
// itself: [id+1, -id-1] from "id" alone. It records the sizes of the
// batches it was given.
type sumParser struct {
	mu    sync.Mutex
	sizes []int
}

func (p *sumParser) Parse(examples []Example) (sharding.Batch, error) {
	p.mu.Lock()
	p.sizes = append(p.sizes, len(examples))
	p.mu.Unlock()
	ids := make([]int64, len(examples))
	x := make([]float32, 0, 2*len(examples))
	y := make([]float64, len(examples))
	for i, ex := range examples {
		f, ok := ex["id"]
		if !ok || len(f.Int64s) != 1 {
			return sharding.Batch{}, &ParseError{Example: i, Feature: "id", Err: errors.New("want one int64")}
		}
		ids[i] = f.Int64s[0]
		x = append(x, float32(ids[i]+1), -float32(ids[i]+1))
		y[i] = 2 * float64(ids[i])
	}
	return sharding.Batch{
		Features: map[string]*tensor.Dense{
			"id": tensor.New(tensor.WithShape(len(examples)), tensor.WithBacking(ids)),
			"x":  tensor.New(tensor.WithShape(len(examples), 2), tensor.WithBacking(x)),
		},
		Labels: map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(len(examples)), tensor.WithBacking(y))},
	}, nil
}

// A Pipeline with a Parser gives the batches it parses, the same whatever
// the workers and processes; each process's parser sees only its rows.
func TestPipelineParser(t *testing.T) {
	files, _ := writeIDFiles(t, []int{9, 14, 5})
	// By record: the processes' parts together are then one process's batches.
	base := Pipeline{Files: files, Spec: idSpec, BatchSize: 6, Epochs: 2, ShuffleBuffer: 7, Seed: 11, CycleLength: 2, Sharing: ShareRecords}
	want := readPipeline(t, base, 0, -1)
	for i := range want { // x as sumParser computes it
		for j := range want[i].X {
			if j%2 == 0 {
				want[i].X[j]++
			} else {
				want[i].X[j]--
			}
		}
	}
	for _, tc := range []struct{ workers, processes int }{{1, 1}, {3, 1}, {2, 2}, {1, 3}} {
		t.Run(fmt.Sprintf("%d workers, %d processes", tc.workers, tc.processes), func(t *testing.T) {
			var parts [][]got
			for rank := range tc.processes {
				p := base
				parser := &sumParser{}
				p.Spec, p.Parser = nil, parser
				p.Workers, p.Processes, p.Rank = tc.workers, tc.processes, rank
				parts = append(parts, readPipeline(t, p, 0, -1))
				for _, n := range parser.sizes {
					if n > (base.BatchSize+tc.processes-1)/tc.processes {
						t.Errorf("process %d of %d parsed a batch of %d records, more than its part of %d", rank, tc.processes, n, base.BatchSize)
					}
				}
			}
			var joined []got
			for i := range parts[0] {
				var b got
				for _, part := range parts {
					b.IDs = append(b.IDs, part[i].IDs...)
					b.X = append(b.X, part[i].X...)
					b.Y = append(b.Y, part[i].Y...)
				}
				joined = append(joined, b)
			}
			if diff := cmp.Diff(want, joined); diff != "" {
				t.Errorf("batches (-want +got):\n%s", diff)
			}
		})
	}
}

// barrierParser's first call waits until a second one begins: a pipeline
// that parsed one batch at a time would never finish.
type barrierParser struct {
	sumParser
	calls int
	both  chan struct{}
}

func (p *barrierParser) Parse(examples []Example) (sharding.Batch, error) {
	p.mu.Lock()
	p.calls++
	n := p.calls
	p.mu.Unlock()
	switch n {
	case 1:
		<-p.both
	case 2:
		close(p.both)
	}
	return p.sumParser.Parse(examples)
}

// The workers run the Parser on two batches at once.
func TestPipelineParserRunsInParallel(t *testing.T) {
	files, _ := writeIDFiles(t, []int{8})
	p := &barrierParser{both: make(chan struct{})}
	got := readPipeline(t, Pipeline{Files: files, Parser: p, BatchSize: 2, Workers: 2, Prefetch: 2}, 0, -1)
	if len(got) != 4 {
		t.Errorf("%d batches, want 4", len(got))
	}
}

// failingParser fails, or panics, on the batch holding the id fail.
type failingParser struct {
	fail   int64
	panics bool
	plain  bool // a plain error, not a *ParseError
}

func (p failingParser) Parse(examples []Example) (sharding.Batch, error) {
	for i, ex := range examples {
		if ex["id"].Int64s[0] != p.fail {
			continue
		}
		switch {
		case p.panics:
			panic("no such id")
		case p.plain:
			return sharding.Batch{}, errors.New("the batch is wrong")
		}
		return sharding.Batch{}, &ParseError{Example: i, Feature: "id", Err: errors.New("no such id")}
	}
	return (&sumParser{}).Parse(examples)
}

// rowsParser returns a batch of the wrong number of rows.
type rowsParser struct{}

func (rowsParser) Parse(examples []Example) (sharding.Batch, error) {
	return sharding.Batch{Features: map[string]*tensor.Dense{"id": tensor.New(tensor.WithShape(1), tensor.WithBacking([]int64{1}))}}, nil
}

// A Parser's errors name the file and record of the example a *ParseError
// names, or the records of the batch; its panics, and batches without a
// row per record, name the parser.
func TestPipelineParserErrors(t *testing.T) {
	files, _ := writeIDFiles(t, []int{6})
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "rows.csv")
	if err := os.WriteFile(csvPath, []byte("id\n1\n2\n3\n4\n5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	csvOpts := &CSVOptions{Schema: Schema{{Name: "id", Kind: KindInt64}}}
	tests := []struct {
		name string
		p    Pipeline
		want []string
	}{
		{"a parse error", Pipeline{Files: files, Parser: failingParser{fail: 4}, BatchSize: 3},
			[]string{"batch 1", files[0] + ": record 4 at byte", `feature "id"`, "no such id"}},
		{"a plain error", Pipeline{Files: files, Parser: failingParser{fail: 4, plain: true}, BatchSize: 3, Workers: 2},
			[]string{"batch 1 (3 records: " + files[0] + " records 3-5)", "the batch is wrong"}},
		{"a plain error in a shuffled CSV batch", Pipeline{Files: []string{csvPath}, CSV: csvOpts, Parser: failingParser{fail: 2, plain: true}, BatchSize: 5, ShuffleBuffer: 5, Seed: 2},
			[]string{"batch 0 (5 records: " + csvPath + " lines ", "the batch is wrong"}},
		{"a CSV parse error", Pipeline{Files: []string{csvPath}, CSV: csvOpts, Parser: failingParser{fail: 3}, BatchSize: 2},
			[]string{"batch 1", csvPath + ":4", `feature "id"`}},
		{"a panic", Pipeline{Files: files, Parser: failingParser{fail: 1, panics: true}, BatchSize: 3},
			[]string{"batch 0 (3 records: " + files[0] + " records 0-2)", "parser dataset.failingParser", "panic", "no such id"}},
		{"rows missing", Pipeline{Files: files, Parser: rowsParser{}, BatchSize: 3},
			[]string{"batch 0", "parser dataset.rowsParser", `a batch of 3 examples gave feature "id" without 3 rows`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wanterr.Mentions(t, lastInputError(t, tc.p), tc.want...)
		})
	}
	if _, err := (Pipeline{Files: files, Spec: idSpec, Parser: &sumParser{}, BatchSize: 1}).Input(); err == nil || !strings.Contains(err.Error(), "both a Spec and a Parser") {
		t.Errorf("a Spec and a Parser: error %v, want one saying both were given", err)
	}
}

func TestDescribeRecords(t *testing.T) {
	rec := func(file string, n int64) record { return record{src: origin{file, n, 8 * n}} }
	var many []record
	for i := range 20 {
		many = append(many, rec("a", int64(2*i)))
	}
	tests := []struct {
		name string
		recs []record
		want string
	}{
		{"one run", []record{rec("a", 3), rec("a", 4), rec("a", 5)}, "3 records: a records 3-5"},
		{"files and runs", []record{rec("a", 0), rec("b", 7), rec("a", 1), rec("a", 4), rec("b", 8)}, "5 records: a records 0-1,4; b records 7-8"},
		{"lines", []record{{src: origin{"x.csv", 2, -1}}, {src: origin{"x.csv", 3, -1}}}, "2 records: x.csv lines 2-3"},
		{"too many runs", many, "20 records: a records 0,2,4,6,8,10,12,14 and 12 more runs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := describeRecords(tc.recs); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// boundedParser is failingParser that records the bounds ParseBounded
// was given, and panics there when told to.
type boundedParser struct {
	failingParser
	got map[string]int
}

func (p *boundedParser) ParseBounded(examples []Example, most map[string]int) (sharding.Batch, error) {
	p.got = most
	return p.Parse(examples)
}

// ParseGuardedBounded gives a BoundedParser its bounds, runs a plain
// Parser's Parse, and guards both as ParseGuarded does: a panic is an
// error wrapping ErrParser that names the parser and the method.
func TestParseGuardedBounded(t *testing.T) {
	exs := []Example{{"id": {Int64s: []int64{1}}}, {"id": {Int64s: []int64{2}}}}
	most := map[string]int{"id": 1}
	type got struct {
		Bounds   map[string]int // what ParseBounded was given
		Rows     int            // rows of the batch
		Err      string         // the error, "" for none
		ParserEr bool           // the error wraps ErrParser
	}
	for _, tc := range []struct {
		name string
		p    Parser
		want got
	}{
		{"bounded", &boundedParser{}, got{Bounds: most, Rows: 2}},
		{"plain", failingParser{fail: -1}, got{Rows: 2}},
		{"bounded, a parse error", &boundedParser{failingParser: failingParser{fail: 2}}, got{Bounds: most, Err: `example 1: feature "id": no such id`}},
		{"bounded, a panic", &boundedParser{failingParser: failingParser{fail: 2, panics: true}}, got{Bounds: most, Err: "parser *dataset.boundedParser: panic during ParseBounded", ParserEr: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ParseGuardedBounded(tc.p, exs, most)
			var g got
			if bp, ok := tc.p.(*boundedParser); ok {
				g.Bounds = bp.got
			}
			if err != nil {
				g.Err, g.ParserEr = err.Error(), errors.Is(err, ErrParser)
				if tc.want.Err != "" && strings.Contains(g.Err, tc.want.Err) {
					g.Err = tc.want.Err
				}
			} else {
				g.Rows = b.Features["id"].Shape()[0]
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
