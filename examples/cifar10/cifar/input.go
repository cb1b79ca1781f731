package cifar

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/sharding"
)

// Pad is how far a training crop may move the image each way: the crop is
// a Side×Side window of the image padded with Pad pixels on each side.
const Pad = 4

// Crop writes into dst the normalized pixels (see Normalize) of the
// Side×Side window at column x0 and row y0, each 0 to 2·Pad, of img padded
// with Pad black pixels (value 0) on each side, flipped left to right when
// flip is set. x0 = y0 = Pad without flip is the image itself.
//
// The padding is black before normalization, as PyTorch's
// RandomCrop(32, padding=4) pads the images of the usual CIFAR-10 recipes
// before they are normalized: after it, a padded pixel of channel c is
// Normalize(c, 0), −Mean[c]/Std[c], not 0.
func Crop(dst []float32, img []byte, x0, y0 int, flip bool) {
	dx, dy := x0-Pad, y0-Pad
	for c := range Channels {
		lut := &normalized[c]
		black := lut[0]
		plane := img[c*Side*Side : (c+1)*Side*Side]
		for y := range Side {
			out := dst[(c*Side+y)*Side : (c*Side+y+1)*Side]
			sy := y + dy
			if sy < 0 || sy >= Side {
				for x := range out {
					out[x] = black
				}
				continue
			}
			row := plane[sy*Side : (sy+1)*Side]
			for x := range out {
				sx := x
				if flip {
					sx = Side - 1 - x
				}
				sx += dx
				if sx < 0 || sx >= Side {
					out[x] = black
				} else {
					out[x] = lut[row[sx]]
				}
			}
		}
	}
}

// Augmentation returns the crop (see Crop) and flip of example i in epoch
// e of a training input seeded with seed: the window's corner uniform over
// 0 to 2·Pad each way, a flip with probability one half. They depend on
// nothing else, so that a run sees the same images however the input
// shuffles them and whichever worker makes them.
func Augmentation(seed uint64, epoch, i int) (x0, y0 int, flip bool) {
	h := mix(mix(mix(seed^0x6175676d656e74)^uint64(epoch)) ^ uint64(i))
	const n = 2*Pad + 1
	return int(h % n), int(h / n % n), h>>63 == 1
}

// mix is SplitMix64's step: a bijection of 64-bit words that scatters
// every input bit over the output.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// InputConfig configures TrainInput.
type InputConfig struct {
	// BatchSize is the number of examples per batch; the last batch of an
	// epoch may be smaller (see DropRemainder). Required.
	BatchSize int
	// DropRemainder drops the last batch of an epoch when it is smaller
	// than BatchSize: every batch then splits alike across the towers.
	DropRemainder bool
	// Epochs is how many passes over the data to make: 0 means 1,
	// estimator.Forever repeats without end.
	Epochs int
	// Shuffle reorders the examples in every epoch, each epoch's order
	// drawn from Seed and the epoch's number.
	Shuffle bool
	// Augment crops and flips every training image at random (see Crop and
	// Augmentation), from Seed, the epoch and the example.
	Augment bool
	// Seed seeds the order and the augmentation: the same seed gives the
	// same batches, whatever Workers.
	Seed uint64
	// Workers is the number of goroutines making batches: 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Processes, when more than 1, makes this the input of process Rank of
	// that many training together (replicate.Config.Processes): BatchSize
	// is the batch of all of them, and this process makes only its part of
	// every batch, as estimator.TensorInput's Processes does. Every
	// process must use the same set, Seed and BatchSize.
	Processes, Rank int
}

// TrainInput returns an input function over set's examples: batches of
// the features {ImageKey: float32 normalized images (N, Channels, Side,
// Side)} and the labels {LabelKey: int64 classes (N)}, as cfg says.
//
// Worker goroutines make the batches ahead of the consumer, each worker
// every Workers-th batch, at most two batches each, and the consumer takes
// them in order: the batches depend on cfg and set only. The workers stop
// when ctx is done, when the consumer stops taking batches or after the
// last batch, before the sequence returns. Full batches released (see
// estimator.Batch's Release) are made again in their memory.
func TrainInput(set *Set, cfg InputConfig) (estimator.InputFn, error) {
	switch {
	case set == nil || set.Len() == 0:
		return nil, fmt.Errorf("CIFAR-10 input: no examples")
	case len(set.Pixels) != set.Len()*ImageSize:
		return nil, fmt.Errorf("CIFAR-10 input: %d pixels are not %d images of %d bytes", len(set.Pixels), set.Len(), ImageSize)
	case cfg.BatchSize < 1:
		return nil, fmt.Errorf("CIFAR-10 input: batch size %d, want at least 1", cfg.BatchSize)
	case cfg.DropRemainder && set.Len() < cfg.BatchSize:
		return nil, fmt.Errorf("CIFAR-10 input: %d examples make no whole batch of %d, and DropRemainder drops the rest", set.Len(), cfg.BatchSize)
	case cfg.Epochs < estimator.Forever:
		return nil, fmt.Errorf("CIFAR-10 input: epochs %d, want 0 or more, or estimator.Forever", cfg.Epochs)
	case cfg.Workers < 0:
		return nil, fmt.Errorf("CIFAR-10 input: %d workers, want 0 (GOMAXPROCS) or more", cfg.Workers)
	case cfg.Processes > 1 && (cfg.Rank < 0 || cfg.Rank >= cfg.Processes):
		return nil, fmt.Errorf("CIFAR-10 input: rank %d of %d processes does not exist", cfg.Rank, cfg.Processes)
	case cfg.Processes > 1 && cfg.BatchSize < cfg.Processes:
		return nil, fmt.Errorf("CIFAR-10 input: a batch of %d examples cannot give each of %d processes one", cfg.BatchSize, cfg.Processes)
	case cfg.Processes > 1 && !cfg.DropRemainder && set.Len()%cfg.BatchSize != 0 && set.Len()%cfg.BatchSize < cfg.Processes:
		return nil, fmt.Errorf("CIFAR-10 input: the last batch of an epoch has %d examples, fewer than the %d processes; set DropRemainder or another batch size", set.Len()%cfg.BatchSize, cfg.Processes)
	}
	p := &pipeline{set: set, cfg: cfg, workers: cfg.Workers, perEpoch: set.Len() / cfg.BatchSize, parts: max(cfg.Processes, 1)}
	lo, hi := p.part(cfg.BatchSize)
	p.fullPart = hi - lo
	if p.workers == 0 {
		p.workers = runtime.GOMAXPROCS(0)
	}
	if !cfg.DropRemainder && set.Len()%cfg.BatchSize != 0 {
		p.perEpoch++
	}
	switch cfg.Epochs {
	case estimator.Forever:
		p.total = -1
	case 0:
		p.total = p.perEpoch
	default:
		p.total = cfg.Epochs * p.perEpoch
	}
	return p.batches, nil
}

// EvalInput returns an input function over set's examples in order, once,
// as TrainInput makes them without shuffling or augmentation: the last
// batch is smaller when batchSize does not divide the examples. With
// processes > 1 it is process rank's part of every batch.
func EvalInput(set *Set, batchSize, processes, rank int) (estimator.InputFn, error) {
	return TrainInput(set, InputConfig{BatchSize: batchSize, Epochs: 1, Processes: processes, Rank: rank})
}

// pipeline is a TrainInput's input function.
type pipeline struct {
	set      *Set
	cfg      InputConfig
	workers  int
	perEpoch int // batches per epoch
	total    int // batches in all; −1 without end
	// parts is the number of processes sharing each batch, and fullPart
	// this one's part of a full batch, in examples.
	parts, fullPart int
}

// part returns this process's examples [lo, hi) of a batch of n; TrainInput
// checked that every part has one.
func (p *pipeline) part(n int) (lo, hi int) {
	if p.parts < 2 {
		return 0, n
	}
	lo, hi, _ = sharding.Part(n, p.parts, p.cfg.Rank)
	return lo, hi
}

// buffers are the memory of a full batch, for reuse.
type buffers struct {
	x []float32
	y []int64
}

// running counts the workers of all inputs that have started and not yet
// returned, for the tests.
var running atomic.Int64

func (p *pipeline) batches(ctx context.Context) iter.Seq2[estimator.Batch, error] {
	return func(yield func(estimator.Batch, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(estimator.Batch{}, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() {
			cancel()
			wg.Wait()
		}()
		out := make([]chan estimator.Batch, p.workers)
		free := make(chan buffers, 2*p.workers+2)
		for w := range out {
			out[w] = make(chan estimator.Batch, 1)
			running.Add(1)
			wg.Go(func() {
				defer running.Add(-1)
				p.work(ctx, w, out[w], free)
			})
		}
		for k := 0; p.total < 0 || k < p.total; k++ {
			if err := ctx.Err(); err != nil {
				yield(estimator.Batch{}, err)
				return
			}
			select {
			case b := <-out[k%p.workers]:
				if !yield(b, nil) {
					return
				}
			case <-ctx.Done():
				yield(estimator.Batch{}, ctx.Err())
				return
			}
		}
	}
}

// work makes batches w, w+Workers, w+2·Workers… and sends them to out
// until the last or until ctx is done.
func (p *pipeline) work(ctx context.Context, w int, out chan<- estimator.Batch, free chan buffers) {
	epoch, order := -1, []int(nil)
	for k := w; p.total < 0 || k < p.total; k += p.workers {
		if ctx.Err() != nil {
			return
		}
		e, j := k/p.perEpoch, k%p.perEpoch
		if e != epoch {
			epoch, order = e, p.order(e, order)
		}
		idx := order[j*p.cfg.BatchSize : min((j+1)*p.cfg.BatchSize, len(order))]
		lo, hi := p.part(len(idx))
		b := p.batch(e, idx[lo:hi], free)
		select {
		case out <- b:
		case <-ctx.Done():
			return
		}
	}
}

// order returns the examples of epoch e in their order, in buf's memory
// if it has some.
func (p *pipeline) order(e int, buf []int) []int {
	n := p.set.Len()
	if buf == nil {
		buf = make([]int, n)
	}
	for i := range buf {
		buf[i] = i
	}
	if p.cfg.Shuffle {
		r := rand.New(rand.NewPCG(p.cfg.Seed, mix(uint64(e)^0x73687566666c65)))
		r.Shuffle(n, func(i, j int) { buf[i], buf[j] = buf[j], buf[i] })
	}
	return buf
}

// batch makes the batch of examples idx in epoch e, in the memory of a
// released batch when it is full and there is one.
func (p *pipeline) batch(e int, idx []int, free chan buffers) estimator.Batch {
	n := len(idx)
	full := n == p.fullPart
	var buf buffers
	if full {
		select {
		case buf = <-free:
		default:
		}
	}
	if buf.x == nil {
		buf = buffers{x: make([]float32, n*ImageSize), y: make([]int64, n)}
	}
	for r, i := range idx {
		buf.y[r] = int64(p.set.Labels[i])
		dst, img := buf.x[r*ImageSize:(r+1)*ImageSize], p.set.Image(i)
		if p.cfg.Augment {
			x0, y0, flip := Augmentation(p.cfg.Seed, e, i)
			Crop(dst, img, x0, y0, flip)
		} else {
			NormalizeImage(dst, img)
		}
	}
	b := estimator.Batch{
		Features: map[string]*tensor.Dense{ImageKey: tensor.New(tensor.WithShape(n, Channels, Side, Side), tensor.WithBacking(buf.x))},
		Labels:   map[string]*tensor.Dense{LabelKey: tensor.New(tensor.WithShape(n), tensor.WithBacking(buf.y))},
	}
	if full {
		var once sync.Once
		b.Release = func() {
			once.Do(func() {
				select {
				case free <- buf:
				default:
				}
			})
		}
	}
	return b
}
