package cifar_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/cifar10/cifar"
	"github.com/towerflow/towerflow/internal/wanterr"
)

// positions returns an image that tells where each of its pixels is: red
// 8+7x, green 8+7y (x, y 0 to 31: 8 to 225), blue 200; none is 0, the
// padding's value.
func positions() []byte {
	img := make([]byte, cifar.ImageSize)
	for y := range cifar.Side {
		for x := range cifar.Side {
			img[y*32+x] = byte(8 + 7*x)
			img[1024+y*32+x] = byte(8 + 7*y)
			img[2048+y*32+x] = 200
		}
	}
	return img
}

// pixel returns the raw value of normalized pixel v of channel c.
func pixel(t *testing.T, c int, v float32) int {
	t.Helper()
	for p := range 256 {
		if cifar.Normalize(c, byte(p)) == v {
			return p
		}
	}
	t.Fatalf("channel %d: %v is no normalized pixel", c, v)
	return -1
}

// source returns the position in positions() that pixel (x, y) of a
// crop came from, or {-1, -1} for padding; it checks that the three
// channels agree.
func source(t *testing.T, crop []float32, x, y int) [2]int {
	t.Helper()
	r, g, b := pixel(t, 0, crop[y*32+x]), pixel(t, 1, crop[1024+y*32+x]), pixel(t, 2, crop[2048+y*32+x])
	if r == 0 && g == 0 && b == 0 {
		return [2]int{-1, -1}
	}
	if b != 200 || (r-8)%7 != 0 || (g-8)%7 != 0 {
		t.Fatalf("pixel (%d, %d) is (%d, %d, %d): no pixel of the image", x, y, r, g, b)
	}
	return [2]int{(r - 8) / 7, (g - 8) / 7}
}

func TestCrop(t *testing.T) {
	pad := [2]int{-1, -1}
	type at struct{ x, y int }
	tests := []struct {
		name   string
		x0, y0 int
		flip   bool
		// want are pixels of the crop and where in the image they come
		// from, (x, y).
		want map[at][2]int
	}{
		{"centre: the image", 4, 4, false, map[at][2]int{{0, 0}: {0, 0}, {31, 0}: {31, 0}, {5, 17}: {5, 17}, {31, 31}: {31, 31}}},
		{"top left: padding above and left", 0, 0, false, map[at][2]int{
			{0, 0}: pad, {3, 3}: pad, {31, 3}: pad, {3, 31}: pad, {4, 4}: {0, 0}, {31, 31}: {27, 27}, {10, 4}: {6, 0}}},
		{"bottom right: padding below and right", 8, 8, false, map[at][2]int{
			{0, 0}: {4, 4}, {27, 27}: {31, 31}, {28, 0}: pad, {0, 28}: pad, {31, 31}: pad, {27, 0}: {31, 4}}},
		{"right, up", 7, 1, false, map[at][2]int{{0, 0}: pad, {0, 3}: {3, 0}, {28, 3}: {31, 0}, {29, 3}: pad, {28, 31}: {31, 28}}},
		{"flip", 4, 4, true, map[at][2]int{{0, 0}: {31, 0}, {31, 0}: {0, 0}, {5, 17}: {26, 17}, {31, 31}: {0, 31}}},
		{"flip after the crop", 0, 4, true, map[at][2]int{{0, 0}: {27, 0}, {27, 0}: {0, 0}, {28, 0}: pad, {31, 9}: pad, {27, 9}: {0, 9}}},
		{"flip, down", 8, 0, true, map[at][2]int{{0, 0}: pad, {0, 4}: pad, {3, 4}: pad, {4, 4}: {31, 0}, {31, 4}: {4, 0}, {31, 31}: {4, 27}}},
	}
	img := positions()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			crop := make([]float32, cifar.ImageSize)
			cifar.Crop(crop, img, tc.x0, tc.y0, tc.flip)
			got := map[at][2]int{}
			for p := range tc.want {
				got[p] = source(t, crop, p.x, p.y)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("sources of pixels (-want +got):\n%s", diff)
			}
			// Every pixel: the padded image's (x0+x', y0+y), x' = x or,
			// flipped, 31−x.
			for y := range 32 {
				for x := range 32 {
					sx := x
					if tc.flip {
						sx = 31 - x
					}
					want := [2]int{sx + tc.x0 - 4, y + tc.y0 - 4}
					if want[0] < 0 || want[0] > 31 || want[1] < 0 || want[1] > 31 {
						want = pad
					}
					if got := source(t, crop, x, y); got != want {
						t.Fatalf("pixel (%d, %d) comes from %v, want %v", x, y, got, want)
					}
				}
			}
		})
	}
}

// TestCropPadding: padding is black before normalization, not the mean.
func TestCropPadding(t *testing.T) {
	img := make([]byte, cifar.ImageSize)
	for i := range img {
		img[i] = 255
	}
	crop := make([]float32, cifar.ImageSize)
	cifar.Crop(crop, img, 0, 0, false)
	got := [][2]float32{{crop[0], crop[31*32+31]}, {crop[1024], crop[1024+31*32+31]}, {crop[2048], crop[2048+31*32+31]}}
	var want [][2]float32
	for c := range 3 {
		want = append(want, [2]float32{-cifar.Mean[c] / cifar.Std[c], (1 - cifar.Mean[c]) / cifar.Std[c]})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(padding, pixel) per channel (-want +got):\n%s", diff)
	}
}

func TestAugmentation(t *testing.T) {
	const n = 4000
	var xs, ys [9]int
	flips, sameNextEpoch := 0, 0
	for i := range n {
		x0, y0, flip := cifar.Augmentation(1, 0, i)
		if x0 < 0 || x0 > 8 || y0 < 0 || y0 > 8 {
			t.Fatalf("example %d: crop at (%d, %d), want 0 to 8", i, x0, y0)
		}
		xs[x0]++
		ys[y0]++
		if flip {
			flips++
		}
		if x1, y1, flip1 := cifar.Augmentation(1, 1, i); x1 == x0 && y1 == y0 && flip1 == flip {
			sameNextEpoch++
		}
		if x, y, f := cifar.Augmentation(1, 0, i); x != x0 || y != y0 || f != flip {
			t.Fatalf("example %d: (%d, %d, %v), then (%d, %d, %v)", i, x0, y0, flip, x, y, f)
		}
	}
	for k := range 9 {
		if xs[k] < n/9*3/4 || ys[k] < n/9*3/4 {
			t.Errorf("corner %d: %d times as x and %d as y of %d, want about %d", k, xs[k], ys[k], n, n/9)
		}
	}
	if flips < n*45/100 || flips > n*55/100 {
		t.Errorf("%d flips of %d, want about half", flips, n)
	}
	// One in 162 alike by chance.
	if sameNextEpoch > n/50 {
		t.Errorf("%d of %d examples are augmented alike in epochs 0 and 1", sameNextEpoch, n)
	}
}

// batch is a batch's data, copied.
type batch struct {
	X     []float32
	Shape []int
	Y     []int64
}

// diffBatches describes how got differs from want: the first batch that
// does, and how; "" when they are the same. (cmp.Diff of a thousand
// batches' pixels takes seconds.)
func diffBatches(want, got []batch) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d batches, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if d := cmp.Diff([2][]int64{toInt64(w.Shape), w.Y}, [2][]int64{toInt64(g.Shape), g.Y}); d != "" {
			return fmt.Sprintf("batch %d: (shape, labels) (-want +got):\n%s", i, d)
		}
		if !slices.Equal(w.X, g.X) {
			n, first := 0, -1
			for j := range w.X {
				if w.X[j] != g.X[j] {
					n++
					if first < 0 {
						first = j
					}
				}
			}
			return fmt.Sprintf("batch %d: %d of %d pixels differ, the first %d: %v, want %v", i, n, len(w.X), first, g.X[first], w.X[first])
		}
	}
	return ""
}

func toInt64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// collect runs in to its end and returns copies of its batches, releasing
// each when release is set.
func collect(t *testing.T, in estimator.InputFn, release bool) []batch {
	t.Helper()
	var out []batch
	for b, err := range in(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		x, y := b.Features[cifar.ImageKey], b.Labels[cifar.LabelKey]
		out = append(out, batch{
			X:     append([]float32(nil), x.Data().([]float32)...),
			Shape: x.Shape().Clone(),
			Y:     append([]int64(nil), y.Data().([]int64)...),
		})
		if len(b.Features) != 1 || len(b.Labels) != 1 {
			t.Fatalf("batch of features %v and labels %v", b.Features, b.Labels)
		}
		if release && b.Release != nil {
			b.Release()
		}
	}
	return out
}

func TestInputBatches(t *testing.T) {
	s := set(7)
	features := s.Features()[cifar.ImageKey].Data().([]float32)
	rows := func(idx ...int) batch {
		b := batch{Shape: []int{len(idx), 3, 32, 32}}
		for _, i := range idx {
			b.X = append(b.X, features[i*cifar.ImageSize:(i+1)*cifar.ImageSize]...)
			b.Y = append(b.Y, int64(s.Labels[i]))
		}
		return b
	}
	eval := func(size int) func() (estimator.InputFn, error) {
		return func() (estimator.InputFn, error) { return cifar.EvalInput(s, size, 1, 0) }
	}
	train := func(cfg cifar.InputConfig) func() (estimator.InputFn, error) {
		return func() (estimator.InputFn, error) { return cifar.TrainInput(s, cfg) }
	}
	tests := []struct {
		name  string
		input func() (estimator.InputFn, error)
		want  []batch
	}{
		{"eval, last batch smaller", eval(3), []batch{rows(0, 1, 2), rows(3, 4, 5), rows(6)}},
		{"eval, one batch", eval(7), []batch{rows(0, 1, 2, 3, 4, 5, 6)}},
		{"eval, batch larger than the set", eval(100), []batch{rows(0, 1, 2, 3, 4, 5, 6)}},
		{"eval, one worker", train(cifar.InputConfig{BatchSize: 2, Workers: 1}), []batch{rows(0, 1), rows(2, 3), rows(4, 5), rows(6)}},
		{"more workers than batches", train(cifar.InputConfig{BatchSize: 4, Workers: 9}), []batch{rows(0, 1, 2, 3), rows(4, 5, 6)}},
		{"drop remainder", train(cifar.InputConfig{BatchSize: 3, DropRemainder: true, Workers: 2}), []batch{rows(0, 1, 2), rows(3, 4, 5)}},
		{"two epochs", train(cifar.InputConfig{BatchSize: 4, Epochs: 2, Workers: 3}), []batch{rows(0, 1, 2, 3), rows(4, 5, 6), rows(0, 1, 2, 3), rows(4, 5, 6)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := tc.input()
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffBatches(tc.want, collect(t, in, true)); diff != "" {
				t.Error(diff)
			}
			if diff := diffBatches(tc.want, collect(t, in, false)); diff != "" {
				t.Errorf("a second run: %s", diff)
			}
		})
	}
}

func TestInputErrors(t *testing.T) {
	ragged := set(2)
	ragged.Pixels = ragged.Pixels[:5]
	tests := []struct {
		name string
		set  *cifar.Set
		cfg  cifar.InputConfig
		want string
	}{
		{"no set", nil, cifar.InputConfig{BatchSize: 1}, "no examples"},
		{"no examples", &cifar.Set{}, cifar.InputConfig{BatchSize: 1}, "no examples"},
		{"ragged", ragged, cifar.InputConfig{BatchSize: 1}, "5 pixels are not 2 images"},
		{"no batch size", set(3), cifar.InputConfig{}, "batch size 0"},
		{"no whole batch", set(3), cifar.InputConfig{BatchSize: 4, DropRemainder: true}, "3 examples make no whole batch of 4"},
		{"epochs", set(3), cifar.InputConfig{BatchSize: 1, Epochs: -2}, "epochs -2"},
		{"workers", set(3), cifar.InputConfig{BatchSize: 1, Workers: -1}, "-1 workers"},
		{"rank", set(4), cifar.InputConfig{BatchSize: 2, Processes: 2, Rank: 2}, "rank 2 of 2 processes"},
		{"batch for processes", set(4), cifar.InputConfig{BatchSize: 2, Processes: 3}, "a batch of 2 examples cannot give each of 3 processes one"},
		{"last batch for processes", set(7), cifar.InputConfig{BatchSize: 3, Processes: 2}, "the last batch of an epoch has 1 examples, fewer than the 2 processes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cifar.TrainInput(tc.set, tc.cfg)
			wanterr.Mentions(t, err, "CIFAR-10 input", tc.want)
		})
	}
}

// TestInputDeterministic: a seed gives the same batches, however many
// workers make them and whether the consumer releases them.
func TestInputDeterministic(t *testing.T) {
	s := cifar.Synthetic(45, 1)
	cfg := cifar.InputConfig{BatchSize: 8, Epochs: 3, Shuffle: true, Augment: true, Seed: 7}
	run := func(workers int, release bool) []batch {
		c := cfg
		c.Workers = workers
		in, err := cifar.TrainInput(s, c)
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, in, release)
	}
	want := run(1, false)
	if len(want) != 18 {
		t.Fatalf("%d batches, want 3 epochs of 6", len(want))
	}
	for _, tc := range []struct {
		workers int
		release bool
	}{{1, true}, {2, false}, {3, true}, {5, true}, {8, false}, {40, true}, {0, true}} {
		if diff := diffBatches(want, run(tc.workers, tc.release)); diff != "" {
			t.Errorf("%d workers, release %v: not one worker's batches: %s", tc.workers, tc.release, diff)
		}
	}
	// Another seed, or another epoch, gives other batches.
	cfg.Seed = 8
	if diffBatches(want, run(4, true)) == "" {
		t.Error("seeds 7 and 8 gave the same batches")
	}
	if diffBatches(want[:1], want[6:7]) == "" {
		t.Error("epochs 0 and 1 begin with the same batch")
	}
}

// TestInputParts: each process's part of every batch, put together in rank
// order, is one process's batch, shuffled and augmented alike.
func TestInputParts(t *testing.T) {
	s := cifar.Synthetic(23, 1)
	for _, procs := range []int{2, 3} {
		cfg := cifar.InputConfig{BatchSize: 8, Epochs: 2, Shuffle: true, Augment: true, Seed: 7, Workers: 2}
		in, err := cifar.TrainInput(s, cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := collect(t, in, true)
		got := make([]batch, len(want))
		for r := range procs {
			c := cfg
			c.Processes, c.Rank = procs, r
			in, err := cifar.TrainInput(s, c)
			if err != nil {
				t.Fatal(err)
			}
			parts := collect(t, in, true)
			if len(parts) != len(want) {
				t.Fatalf("%d processes: rank %d made %d batches, one process %d", procs, r, len(parts), len(want))
			}
			for i, p := range parts {
				if len(p.Y) != len(want[i].Y)/procs+boolInt(r < len(want[i].Y)%procs) {
					t.Errorf("%d processes: rank %d batch %d has %d examples of %d", procs, r, i, len(p.Y), len(want[i].Y))
				}
				g := &got[i]
				g.X, g.Y = append(g.X, p.X...), append(g.Y, p.Y...)
				g.Shape = []int{len(g.Y), 3, 32, 32}
			}
		}
		if diff := diffBatches(want, got); diff != "" {
			t.Errorf("%d processes: the parts are not one process's batches: %s", procs, diff)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// key returns a row's bytes as a map key.
func key(row []float32) string {
	b := make([]byte, 4*len(row))
	for i, v := range row {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return string(b)
}

// TestInputAugmentsExamples: an example is cropped and flipped alike
// wherever shuffling puts it, and every epoch has every example once.
func TestInputAugmentsExamples(t *testing.T) {
	s := cifar.Synthetic(30, 2)
	cfg := cifar.InputConfig{BatchSize: 4, Epochs: 2, Augment: true, Seed: 3, Workers: 3}
	in, err := cifar.TrainInput(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	inOrder := collect(t, in, true)
	cfg.Shuffle = true
	if in, err = cifar.TrainInput(s, cfg); err != nil {
		t.Fatal(err)
	}
	shuffled := collect(t, in, true)
	// The examples of each epoch, in order and as shuffled.
	epochs := func(bs []batch) [][][]float32 {
		var out [][][]float32
		for i, b := range bs {
			if i%8 == 0 {
				out = append(out, nil)
			}
			for r := range b.Shape[0] {
				out[len(out)-1] = append(out[len(out)-1], b.X[r*cifar.ImageSize:(r+1)*cifar.ImageSize])
			}
		}
		return out
	}
	plain, mixed := epochs(inOrder), epochs(shuffled)
	if len(plain) != 2 || len(mixed) != 2 {
		t.Fatalf("%d and %d epochs, want 2", len(plain), len(mixed))
	}
	plainNormalized := s.Features()[cifar.ImageKey].Data().([]float32)
	for e := range 2 {
		index := map[string]int{}
		augmented := 0
		for i, row := range plain[e] {
			index[key(row)] = i
			if !slices.Equal(row, plainNormalized[i*cifar.ImageSize:(i+1)*cifar.ImageSize]) {
				augmented++
			}
		}
		if augmented < 20 {
			t.Errorf("epoch %d: %d of 30 images are changed by the augmentation, want most", e, augmented)
		}
		seen := make([]int, 30)
		moved := 0
		for j, row := range mixed[e] {
			i, ok := index[key(row)]
			if !ok {
				t.Fatalf("epoch %d: shuffled example %d is none of the epoch's augmented examples in order", e, j)
			}
			seen[i]++
			if i != j {
				moved++
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("epoch %d: example %d appears %d times", e, i, n)
			}
		}
		if moved < 20 {
			t.Errorf("epoch %d: shuffling moved %d of 30 examples", e, moved)
		}
	}
}

// TestInputReusesMemory: with one worker, released batches are made again
// in their memory: the batch being used, the one waiting and the one being
// made need three buffers.
func TestInputReusesMemory(t *testing.T) {
	s := cifar.Synthetic(20, 1)
	cfg := cifar.InputConfig{BatchSize: 2, Epochs: 3, Workers: 1, Shuffle: true, Augment: true}
	in, err := cifar.TrainInput(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	backings := map[*float32]bool{}
	n := 0
	for b, err := range in(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		backings[&b.Features[cifar.ImageKey].Data().([]float32)[0]] = true
		b.Release()
		b.Release() // twice does no harm
		n++
	}
	if n != 30 || len(backings) > 3 {
		t.Errorf("%d batches in %d buffers, want 30 in at most 3", n, len(backings))
	}
	// Released twice, every batch is what it is when none is released.
	var want []batch
	for _, release := range []int{0, 2} {
		c := cfg
		c.Workers = 2
		in, err := cifar.TrainInput(s, c)
		if err != nil {
			t.Fatal(err)
		}
		var got []batch
		for b, err := range in(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, collect(t, func(context.Context) iter.Seq2[estimator.Batch, error] {
				return func(yield func(estimator.Batch, error) bool) { yield(b, nil) }
			}, false)...)
			for range release {
				b.Release()
			}
		}
		if release == 0 {
			want = got
		} else if diff := diffBatches(want, got); diff != "" {
			t.Errorf("batches released twice: %s", diff)
		}
	}
}

func TestInputStops(t *testing.T) {
	s := cifar.Synthetic(40, 1)
	tests := []struct {
		name    string
		epochs  int
		workers int
		// stop is called after batch 2; stopped says whether the loop
		// should break.
		cancelBefore bool
		breakAt      int // batch to break after; −1 never
		cancelAt     int // batch after which to cancel; −1 never
		wantBatches  int
		wantErr      error
	}{
		{"break, forever", estimator.Forever, 4, false, 2, -1, 3, nil},
		{"break, one epoch", 1, 3, false, 0, -1, 1, nil},
		{"break, one worker", estimator.Forever, 1, false, 5, -1, 6, nil},
		{"cancel, forever", estimator.Forever, 4, false, -1, 2, 3, context.Canceled},
		{"cancel, many workers", estimator.Forever, 16, false, -1, 0, 1, context.Canceled},
		{"cancel after the last batch: done", 1, 2, false, -1, 9, 10, nil},
		{"cancel before the last batch", 1, 2, false, -1, 8, 9, context.Canceled},
		{"cancelled before", estimator.Forever, 4, true, -1, -1, 0, context.Canceled},
		{"to the end", 2, 3, false, -1, -1, 20, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := cifar.TrainInput(s, cifar.InputConfig{BatchSize: 4, Epochs: tc.epochs, Shuffle: true, Augment: true, Workers: tc.workers})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelBefore {
				cancel()
			}
			batches := 0
			var gotErr error
			for b, err := range in(ctx) {
				if gotErr != nil {
					t.Fatalf("a batch after the error %v", gotErr)
				}
				if err != nil {
					gotErr = err
					continue
				}
				if b.Features == nil {
					t.Fatal("a batch without features")
				}
				if tc.cancelAt == batches {
					cancel()
				}
				batches++
				if tc.breakAt == batches-1 {
					break
				}
			}
			if batches != tc.wantBatches || !errors.Is(gotErr, tc.wantErr) {
				t.Errorf("%d batches, then error %v; want %d, then %v", batches, gotErr, tc.wantBatches, tc.wantErr)
			}
			if n := cifar.RunningWorkers(); n != 0 {
				t.Errorf("%d workers still running after the input returned", n)
			}
		})
	}
}
