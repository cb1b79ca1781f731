package estimator_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/wanterr"
	"github.com/towerflow/towerflow/sharding"
)

// rowData returns n examples whose row i is identifiable: feature "x" is
// [n, 2] with row i = (i, 10i), feature "id" is [n] int64 with element i,
// and label "y" is [n, 1] with row i = 100i.
func rowData(n int) (features, labels map[string]*tensor.Dense) {
	xs, ids, ys := make([]float64, 2*n), make([]int64, n), make([]float64, n)
	for i := range n {
		xs[2*i], xs[2*i+1] = float64(i), float64(10*i)
		ids[i] = int64(i)
		ys[i] = float64(100 * i)
	}
	return map[string]*tensor.Dense{
			"x":  tensor.New(tensor.WithShape(n, 2), tensor.WithBacking(xs)),
			"id": tensor.New(tensor.WithShape(n), tensor.WithBacking(ids)),
		}, map[string]*tensor.Dense{
			"y": tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(ys)),
		}
}

// batchIDs checks that a batch's features and labels describe the same rows
// and returns those row numbers.
func batchIDs(t *testing.T, b estimator.Batch, withLabels bool) []int {
	t.Helper()
	ids := b.Features["id"].Data().([]int64)
	x := b.Features["x"]
	if got, want := []int(x.Shape()), []int{len(ids), 2}; !slices.Equal(got, want) {
		t.Fatalf("feature x has shape %v, want %v", got, want)
	}
	xs := x.Data().([]float64)
	out := make([]int, len(ids))
	for j, id := range ids {
		out[j] = int(id)
		if xs[2*j] != float64(id) || xs[2*j+1] != float64(10*id) {
			t.Fatalf("row %d: x = (%v, %v), id %d", j, xs[2*j], xs[2*j+1], id)
		}
	}
	if !withLabels {
		if b.Labels != nil {
			t.Fatalf("labels %v, want nil", b.Labels)
		}
		return out
	}
	y := b.Labels["y"]
	if got, want := []int(y.Shape()), []int{len(ids), 1}; !slices.Equal(got, want) {
		t.Fatalf("label y has shape %v, want %v", got, want)
	}
	for j, v := range y.Data().([]float64) {
		if v != float64(100*ids[j]) {
			t.Fatalf("row %d: y = %v, id %d", j, v, ids[j])
		}
	}
	return out
}

// collect consumes at most limit batches (all when limit < 0) and returns
// their row numbers.
func collect(t *testing.T, ctx context.Context, in estimator.InputFn, withLabels bool, limit int) [][]int {
	t.Helper()
	var out [][]int
	for b, err := range in(ctx) {
		if err != nil {
			t.Fatalf("batch %d: %v", len(out), err)
		}
		out = append(out, batchIDs(t, b, withLabels))
		if len(out) == limit {
			break
		}
	}
	return out
}

func seq(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func TestFromTensorsBatches(t *testing.T) {
	tests := []struct {
		name   string
		rows   int
		cfg    estimator.TensorInput
		labels bool
		limit  int
		want   [][]int
	}{
		{"even batches", 6, estimator.TensorInput{BatchSize: 3}, true, -1, [][]int{{0, 1, 2}, {3, 4, 5}}},
		{"last batch partial", 7, estimator.TensorInput{BatchSize: 3}, true, -1, [][]int{{0, 1, 2}, {3, 4, 5}, {6}}},
		{"batch larger than data", 2, estimator.TensorInput{BatchSize: 5}, true, -1, [][]int{{0, 1}}},
		{"batch of one", 3, estimator.TensorInput{BatchSize: 1}, true, -1, [][]int{{0}, {1}, {2}}},
		{"epochs 0 is one epoch", 5, estimator.TensorInput{BatchSize: 2, Epochs: 0}, true, -1, [][]int{{0, 1}, {2, 3}, {4}}},
		{"epochs 1", 5, estimator.TensorInput{BatchSize: 2, Epochs: 1}, true, -1, [][]int{{0, 1}, {2, 3}, {4}}},
		{"epochs 2: partial batch per epoch", 5, estimator.TensorInput{BatchSize: 2, Epochs: 2}, true, -1,
			[][]int{{0, 1}, {2, 3}, {4}, {0, 1}, {2, 3}, {4}}},
		{"forever, consume 7", 3, estimator.TensorInput{BatchSize: 2, Epochs: estimator.Forever}, true, 7,
			[][]int{{0, 1}, {2}, {0, 1}, {2}, {0, 1}, {2}, {0, 1}}},
		{"labels nil", 4, estimator.TensorInput{BatchSize: 3}, false, -1, [][]int{{0, 1, 2}, {3}}},
		{"drop remainder", 7, estimator.TensorInput{BatchSize: 3, DropRemainder: true}, true, -1, [][]int{{0, 1, 2}, {3, 4, 5}}},
		{"drop remainder, even batches", 6, estimator.TensorInput{BatchSize: 3, DropRemainder: true}, true, -1, [][]int{{0, 1, 2}, {3, 4, 5}}},
		{"drop remainder, forever", 5, estimator.TensorInput{BatchSize: 2, Epochs: estimator.Forever, DropRemainder: true}, true, 5,
			[][]int{{0, 1}, {2, 3}, {0, 1}, {2, 3}, {0, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			feats, labels := rowData(tc.rows)
			if !tc.labels {
				labels = nil
			}
			in, err := estimator.FromTensors(feats, labels, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := collect(t, context.Background(), in, tc.labels, tc.limit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("batches (-want +got):\n%s", diff)
			}
			// The input function restarts from the beginning on every call.
			if again := collect(t, context.Background(), in, tc.labels, tc.limit); !cmp.Equal(got, again) {
				t.Errorf("second call gave %v, first %v", again, got)
			}
		})
	}
}

func TestFromTensorsBatchesAreCopies(t *testing.T) {
	feats, labels := rowData(4)
	in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	for b, err := range in(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		b.Features["x"].Data().([]float64)[0] = -1
		b.Labels["y"].Data().([]float64)[0] = -1
	}
	if x, y := feats["x"].Data().([]float64)[0], labels["y"].Data().([]float64)[0]; x != 0 || y != 0 {
		t.Errorf("writing a batch changed the source: x[0]=%v y[0]=%v", x, y)
	}
}

// TestFromTensorsReusesReleasedBatches: a released batch's memory is used
// again for a later batch of the same size, and the batches still hold
// the right rows; without Release every batch is new memory; releasing a
// batch twice gives its memory back once.
func TestFromTensorsReusesReleasedBatches(t *testing.T) {
	tests := []struct {
		name     string
		releases int // Release calls per batch
		want     int // distinct backings of feature x over the 9 batches
	}{
		{"not released", 0, 9},
		{"released", 1, 2}, // one for the batches of 3 rows, one for the last of each epoch
		{"released twice", 2, 2},
	}
	feats, labels := rowData(7)
	in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: 3, Epochs: 3})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := [][]int{{0, 1, 2}, {3, 4, 5}, {6}, {0, 1, 2}, {3, 4, 5}, {6}, {0, 1, 2}, {3, 4, 5}, {6}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ids [][]int
			backings := map[*float64]bool{}
			for b, err := range in(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, batchIDs(t, b, true))
				backings[&b.Features["x"].Data().([]float64)[0]] = true
				for range tc.releases {
					b.Release()
				}
			}
			if diff := cmp.Diff(wantIDs, ids); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			if got := len(backings); got != tc.want {
				t.Errorf("%d distinct backings, want %d", got, tc.want)
			}
		})
	}
}

// TestFromTensorsReleaseTwiceSharesNothing: batches held at the same time
// never share memory, even after a batch was released twice.
func TestFromTensorsReleaseTwiceSharesNothing(t *testing.T) {
	feats, labels := rowData(8)
	in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: 2, Epochs: estimator.Forever})
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iter.Pull2(in(context.Background()))
	defer stop()
	take := func() estimator.Batch {
		b, err, ok := next()
		if err != nil || !ok {
			t.Fatalf("next batch: %v, %v", err, ok)
		}
		return b
	}
	held := take()
	released := take()
	released.Release()
	released.Release()
	a, b := take(), take()
	live := map[*float64]string{}
	for name, batch := range map[string]estimator.Batch{"held": held, "first after": a, "second after": b} {
		p := &batch.Features["x"].Data().([]float64)[0]
		if other, dup := live[p]; dup {
			t.Errorf("batches %q and %q share feature x's memory", name, other)
		}
		live[p] = name
	}
	for _, batch := range []estimator.Batch{held, a, b} {
		batchIDs(t, batch, true)
	}
}

func TestFromTensorsEmptyDataEnds(t *testing.T) {
	feats := map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(0, 2), tensor.WithBacking([]float64{}))}
	for _, epochs := range []int{1, 3, estimator.Forever} {
		t.Run(fmt.Sprintf("epochs %d", epochs), func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			in, err := estimator.FromTensors(feats, nil, estimator.TensorInput{BatchSize: 2, Epochs: epochs, Shuffle: true})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, err := range in(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				if n++; n > 10 {
					t.Fatal("empty data yields batches without end")
				}
			}
			if n != 0 {
				t.Errorf("%d batches from empty data, want 0", n)
			}
		})
	}
}

func TestFromTensorsShuffle(t *testing.T) {
	const rows, batch, epochs = 10, 4, 3
	order := func(seed uint64) [][]int {
		t.Helper()
		feats, labels := rowData(rows)
		in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: batch, Epochs: epochs, Shuffle: true, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		// One row order per epoch; batches split each epoch 4, 4, 2.
		var perEpoch [][]int
		for i, b := range collect(t, context.Background(), in, true, -1) {
			if want := []int{4, 4, 2}[i%3]; len(b) != want {
				t.Fatalf("seed %d: batch %d has %d rows, want %d", seed, i, len(b), want)
			}
			if i%3 == 0 {
				perEpoch = append(perEpoch, nil)
			}
			perEpoch[len(perEpoch)-1] = append(perEpoch[len(perEpoch)-1], b...)
		}
		if len(perEpoch) != epochs {
			t.Fatalf("seed %d: %d epochs, want %d", seed, len(perEpoch), epochs)
		}
		for e, o := range perEpoch {
			if sorted := slices.Sorted(slices.Values(o)); !slices.Equal(sorted, seq(0, rows)) {
				t.Errorf("seed %d epoch %d: rows %v are not every row exactly once", seed, e, o)
			}
		}
		return perEpoch
	}
	a, again, b := order(1), order(1), order(2)
	if diff := cmp.Diff(a, again); diff != "" {
		t.Errorf("same seed, different order (-first +second):\n%s", diff)
	}
	if cmp.Equal(a, b) {
		t.Errorf("seeds 1 and 2 gave the same order %v", a)
	}
	if slices.Equal(a[0], seq(0, rows)) && slices.Equal(a[1], seq(0, rows)) {
		t.Errorf("shuffled epochs are in input order: %v", a)
	}
	if slices.Equal(a[0], a[1]) && slices.Equal(a[1], a[2]) {
		t.Errorf("every epoch has the same order %v; want a new shuffle per epoch", a[0])
	}
}

func TestFromTensorsErrors(t *testing.T) {
	feats, labels := rowData(4)
	_, shortLabels := rowData(3)
	tests := []struct {
		name     string
		features map[string]*tensor.Dense
		labels   map[string]*tensor.Dense
		cfg      estimator.TensorInput
		want     []string
	}{
		{"labels disagree with features", feats, shortLabels, estimator.TensorInput{BatchSize: 2}, []string{`label "y"`, "3 rows", `feature "id"`, "4"}},
		{"features disagree", map[string]*tensor.Dense{"a": feats["x"], "b": shortLabels["y"]}, nil, estimator.TensorInput{BatchSize: 2}, []string{`feature "b"`, "3 rows", `feature "a"`, "4"}},
		{"batch size 0", feats, labels, estimator.TensorInput{}, []string{"batch size 0"}},
		{"negative batch size", feats, labels, estimator.TensorInput{BatchSize: -3}, []string{"batch size -3"}},
		{"epochs below Forever", feats, labels, estimator.TensorInput{BatchSize: 2, Epochs: -2}, []string{"epochs -2"}},
		{"rank-0 feature", map[string]*tensor.Dense{"s": tensor.New(tensor.FromScalar(1.0))}, nil, estimator.TensorInput{BatchSize: 1}, []string{`feature "s"`, "rank-0"}},
		{"rank-0 label", feats, map[string]*tensor.Dense{"y": tensor.New(tensor.FromScalar(1.0))}, estimator.TensorInput{BatchSize: 1}, []string{`label "y"`, "rank-0"}},
		{"nil feature", map[string]*tensor.Dense{"x": nil}, nil, estimator.TensorInput{BatchSize: 1}, []string{`feature "x" is nil`}},
		{"no features", nil, nil, estimator.TensorInput{BatchSize: 1}, []string{"no features"}},
		{"no whole batch to keep", feats, labels, estimator.TensorInput{BatchSize: 5, DropRemainder: true}, []string{"4 rows make no whole batch of 5", "DropRemainder"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := estimator.FromTensors(tc.features, tc.labels, tc.cfg)
			if err == nil {
				t.Fatalf("no error (input function %v)", in != nil)
			}
			if in != nil {
				t.Errorf("got an input function with error %v", err)
			}
			wanterr.Mentions(t, err, append([]string{"input from tensors"}, tc.want...)...)
		})
	}
}

func TestFromTensorsCancelled(t *testing.T) {
	feats, labels := rowData(6)
	for _, cancelAfter := range []int{0, 1, 2} { // batches taken before cancelling
		t.Run(fmt.Sprintf("after %d batches", cancelAfter), func(t *testing.T) {
			in, err := estimator.FromTensors(feats, labels, estimator.TensorInput{BatchSize: 1, Epochs: estimator.Forever})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if cancelAfter == 0 {
				cancel()
			}
			var ok int
			var got []error
			for b, err := range in(ctx) {
				if err != nil {
					if got = append(got, err); len(got) > 1 {
						t.Fatal("input yielded after an error")
					}
					continue
				}
				batchIDs(t, b, true)
				if ok++; ok == cancelAfter {
					cancel()
				}
				if ok > cancelAfter {
					t.Fatalf("%d batches after cancelling", ok-cancelAfter)
				}
			}
			if ok != cancelAfter {
				t.Errorf("%d batches, want %d before the error", ok, cancelAfter)
			}
			if len(got) != 1 || !errors.Is(got[0], context.Canceled) {
				t.Errorf("errors %v, want one context.Canceled", got)
			}
		})
	}
}

func TestBatchRows(t *testing.T) {
	col := func(n int) *tensor.Dense {
		return tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(make([]float64, n)))
	}
	sparse := func(rows int) sharding.SparseCOO {
		return sharding.SparseCOO{
			Indices:    [][]int{{0, 1}},
			Values:     tensor.New(tensor.WithShape(1), tensor.WithBacking([]float64{5})),
			DenseShape: []int{rows, 3},
		}
	}
	tests := []struct {
		name    string
		batch   estimator.Batch
		want    int
		wantErr []string
	}{
		{"features and labels", estimator.Batch{Features: map[string]*tensor.Dense{"a": col(3), "b": col(3)}, Labels: map[string]*tensor.Dense{"y": col(3)}}, 3, nil},
		{"sparse only", estimator.Batch{Sparse: map[string]sharding.SparseCOO{"s": sparse(4)}}, 4, nil},
		{"dense and sparse agree", estimator.Batch{Features: map[string]*tensor.Dense{"a": col(2)}, Sparse: map[string]sharding.SparseCOO{"s": sparse(2)}}, 2, nil},
		{"zero rows", estimator.Batch{Features: map[string]*tensor.Dense{"a": col(0)}}, 0, nil},
		{"dense and sparse same key", estimator.Batch{Features: map[string]*tensor.Dense{"s": col(2)}, Sparse: map[string]sharding.SparseCOO{"s": sparse(2)}}, 0, []string{`feature "s"`, "both dense and sparse"}},
		{"sparse rows disagree with dense", estimator.Batch{Features: map[string]*tensor.Dense{"a": col(2)}, Sparse: map[string]sharding.SparseCOO{"s": sparse(5)}}, 0, []string{`sparse feature "s"`, "5 rows", `feature "a"`, "2"}},
		{"sparse rows disagree with each other", estimator.Batch{Sparse: map[string]sharding.SparseCOO{"s": sparse(2), "t": sparse(3)}}, 0, []string{`sparse feature "t"`, "3 rows", `sparse feature "s"`, "2"}},
		{"label rows disagree", estimator.Batch{Features: map[string]*tensor.Dense{"a": col(2)}, Labels: map[string]*tensor.Dense{"y": col(1)}}, 0, []string{`label "y"`, "1 rows", `feature "a"`}},
		{"sparse rank 0", estimator.Batch{Sparse: map[string]sharding.SparseCOO{"s": {Values: tensor.New(tensor.WithShape(0), tensor.WithBacking([]float64{}))}}}, 0, []string{`sparse feature "s"`, "rank-0"}},
		{"nil label", estimator.Batch{Features: map[string]*tensor.Dense{"a": col(2)}, Labels: map[string]*tensor.Dense{"y": nil}}, 0, []string{`label "y" is nil`}},
		{"sparse with negative rows", estimator.Batch{Sparse: map[string]sharding.SparseCOO{"s": sparse(-2)}}, 0, []string{`sparse feature "s"`, "[-2 3]", "negative dimension"}},
		{"zero-sized second dimension", estimator.Batch{Features: map[string]*tensor.Dense{"a": tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3, 0))}}, 0, []string{`feature "a"`, "(3, 0)", "zero-sized"}},
		{"empty", estimator.Batch{}, 0, []string{"no features"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.batch.Rows()
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Errorf("rows %d, want %d", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("rows %d, want an error", got)
			}
			wanterr.Mentions(t, err, tc.wantErr...)
		})
	}
}

// releaseLog counts Release calls per batch: batches are made on the
// input's goroutine and released on the consumer's.
type releaseLog struct {
	mu     sync.Mutex
	counts []int
}

func (l *releaseLog) count(k int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[k]
}

func (l *releaseLog) all() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.counts)
}

// releaseCounting wraps in: each batch's Release also counts into log (by
// the batch's index), after FromTensors' own.
func releaseCounting(in estimator.InputFn, log *releaseLog) estimator.InputFn {
	return func(ctx context.Context) iter.Seq2[estimator.Batch, error] {
		return func(yield func(estimator.Batch, error) bool) {
			for b, err := range in(ctx) {
				if err == nil {
					log.mu.Lock()
					k := len(log.counts)
					log.counts = append(log.counts, 0)
					log.mu.Unlock()
					inner := b.Release
					b.Release = func() {
						log.mu.Lock()
						log.counts[k]++
						log.mu.Unlock()
						inner()
					}
				}
				if !yield(b, err) {
					return
				}
			}
		}
	}
}

// TestTrainAndEvaluateReleaseBatches: Train and Evaluate release every batch
// they consume exactly once, Train only after the step's hooks have run.
func TestTrainAndEvaluateReleaseBatches(t *testing.T) {
	for _, c := range []struct {
		name   string
		towers int
		run    func(t *testing.T, est *estimator.Estimator, in estimator.InputFn, atHook func(step int64))
	}{
		{"train", 1, func(t *testing.T, est *estimator.Estimator, in estimator.InputFn, atHook func(int64)) {
			if err := est.Train(context.Background(), in, estimator.OnStep(func(step int64, _ float64) { atHook(step) })); err != nil {
				t.Fatal(err)
			}
		}},
		{"train, 2 towers", 2, func(t *testing.T, est *estimator.Estimator, in estimator.InputFn, atHook func(int64)) {
			if err := est.Train(context.Background(), in, estimator.OnStep(func(step int64, _ float64) { atHook(step) })); err != nil {
				t.Fatal(err)
			}
		}},
		{"evaluate", 1, func(t *testing.T, est *estimator.Estimator, in estimator.InputFn, _ func(int64)) {
			if _, err := est.Evaluate(context.Background(), in); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			est := newEstimator(t, replicated(lineModel, c.towers))
			var log releaseLog
			in := releaseCounting(lineInput(t, xs(10), 4, true), &log)
			var atHooks []int
			c.run(t, est, in, func(step int64) { atHooks = append(atHooks, log.count(int(step-1))) })
			if diff := cmp.Diff([]int{1, 1, 1}, log.all()); diff != "" {
				t.Errorf("releases per batch (-want +got):\n%s", diff)
			}
			if len(atHooks) > 0 {
				if diff := cmp.Diff([]int{0, 0, 0}, atHooks); diff != "" {
					t.Errorf("releases of the step's batch when its hook ran (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestFromTensorsResumes: a Forever input given a start batch
// (StartBatch, as a resumed Train gives it) yields the batches the
// uninterrupted input yields from there, shuffled or not, whole epochs
// skipped or not; an input of a number of epochs starts over.
func TestFromTensorsResumes(t *testing.T) {
	feats, labels := rowData(7)
	for _, tc := range []struct {
		name  string
		cfg   estimator.TensorInput
		start int64
	}{
		{"in the first epoch", estimator.TensorInput{BatchSize: 3, Epochs: estimator.Forever}, 2},
		{"shuffled, epochs skipped", estimator.TensorInput{BatchSize: 3, Epochs: estimator.Forever, Shuffle: true, Seed: 5}, 7},
		{"at an epoch's start", estimator.TensorInput{BatchSize: 3, Epochs: estimator.Forever, Shuffle: true, Seed: 5}, 6},
		{"drop remainder", estimator.TensorInput{BatchSize: 3, Epochs: estimator.Forever, Shuffle: true, Seed: 2, DropRemainder: true}, 5},
		{"a process's part", estimator.TensorInput{BatchSize: 4, Epochs: estimator.Forever, Shuffle: true, Seed: 3, Processes: 2, Rank: 1}, 4},
		{"epochs start over", estimator.TensorInput{BatchSize: 3, Epochs: 2, Shuffle: true, Seed: 5}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := estimator.FromTensors(feats, labels, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			const n = 8
			all := collect(t, context.Background(), in, true, int(tc.start)+n)
			want := all[tc.start:]
			if tc.cfg.Epochs != estimator.Forever {
				want = all[:min(n, len(all))]
			}
			got := collect(t, estimator.WithStartBatch(context.Background(), tc.start), in, true, n)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("batches from batch %d (-want +got):\n%s", tc.start, diff)
			}
		})
	}
}
