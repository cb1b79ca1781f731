package replicate

import (
	"fmt"
	"maps"
	"slices"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/sharding"
)

// splitBatch splits a batch for mode, TensorFlow's _split_batch: along
// dimension 0, shard sizes differing by at most one. A batch with fewer
// rows than devices runs on fewer towers, one row each (an input's smaller
// last batch): with the default loss reduction, which weights each tower by
// its share of the rows, that step is still one device's on the batch.
// Predict drops the labels.
func (e *Engine) splitBatch(mode model.Mode, b sharding.Batch) ([]sharding.Batch, []int, error) {
	rows, err := b.Rows()
	if err != nil {
		return nil, nil, err
	}
	if rows == 0 {
		return nil, nil, fmt.Errorf("empty batch")
	}
	n := e.towersFor(rows)
	if mode == model.Predict {
		b.Labels = nil
	}
	shards, sizes, err := b.Split(n)
	if err != nil {
		return nil, nil, fmt.Errorf("%v batch across %d towers: %w", mode, n, err)
	}
	return shards, sizes, nil
}

// towersFor is the number of towers a batch of rows rows (at least 1)
// runs on: one per device, or one per row when there are fewer.
func (e *Engine) towersFor(rows int) int { return min(len(e.cfg.Devices), rows) }

// splitCache remembers how the last few batches were split across the
// towers, and their signature, by the identity of their tensors.
// estimator.FromTensors hands out the same few batches in turn (see
// sharding.Batch.Release), so in a training loop a step splits nothing,
// allocates no shard header and formats no signature: the towers are fed
// the shards made for that batch the first time.
type splitCache struct {
	entries [maxSplits]split
	next    int // the entry to replace next
}

// maxSplits is how many batches the cache remembers:
// estimator.FromTensors keeps up to four.
const maxSplits = 4

// split is one batch's shards, with what made them.
type split struct {
	mode     model.Mode
	features map[string]splitSource
	labels   map[string]splitSource
	shards   []sharding.Batch
	feeds    [][]feed // per tower, the shards' tensors by input name
	rows     []int
	key      string
}

// feed is one tensor for a tower's input, or one sparse feature's shard
// (sparse set, v nil) whose row 0 is row offset of the batch.
type feed struct {
	name   string // "features/x", "labels/y"
	v      *tensor.Dense
	sparse *sharding.SparseCOO
	offset int
}

// feedsOf lists, per tower, the inputs shards give it.
func feedsOf(shards []sharding.Batch) [][]feed {
	out := make([][]feed, len(shards))
	offset := 0
	for i, sh := range shards {
		for _, part := range []struct {
			prefix string
			m      map[string]*tensor.Dense
		}{{"features/", sh.Features}, {"labels/", sh.Labels}} {
			for k, v := range part.m {
				out[i] = append(out[i], feed{name: part.prefix + k, v: v})
			}
		}
		for _, k := range slices.Sorted(maps.Keys(sh.Sparse)) {
			v := sh.Sparse[k]
			out[i] = append(out[i], feed{name: "features/" + k, sparse: &v, offset: offset})
		}
		if len(sh.Sparse) > 0 {
			rows, _ := sh.Rows()
			offset += rows
		}
	}
	return out
}

// splitSource is one batch tensor as it was split: the header, its memory
// and its shape.
type splitSource struct {
	t     *tensor.Dense
	data  uintptr
	shape []int
}

// cacheable reports whether b's split can be remembered: not with sparse
// features, whose shards are copies made anew each step.
func cacheable(b sharding.Batch) bool { return len(b.Sparse) == 0 }

// lookup returns the split made for a batch of the same tensors (same
// headers over the same memory, same shapes, so the same rows and towers)
// in the same mode, if its shard headers are still as they were made. It
// allocates nothing.
func (c *splitCache) lookup(mode model.Mode, b sharding.Batch) (*split, bool) {
	for i := range c.entries {
		s := &c.entries[i]
		if s.shards != nil && s.mode == mode &&
			sameSources(s.features, b.Features) && sameSources(s.labels, b.Labels) && s.intact() {
			return s, true
		}
	}
	return nil, false
}

// add remembers the split of b, replacing the oldest.
func (c *splitCache) add(mode model.Mode, b sharding.Batch, shards []sharding.Batch, rows []int, key string) *split {
	c.entries[c.next] = split{
		mode:     mode,
		features: snapshot(b.Features), labels: snapshot(b.Labels),
		shards: shards, feeds: feedsOf(shards), rows: rows, key: key,
	}
	s := &c.entries[c.next]
	c.next = (c.next + 1) % maxSplits
	return s
}

func snapshot(m map[string]*tensor.Dense) map[string]splitSource {
	out := make(map[string]splitSource, len(m))
	for k, t := range m {
		out[k] = splitSource{t: t, data: t.Uintptr(), shape: slices.Clone(t.Shape())}
	}
	return out
}

func sameSources(was map[string]splitSource, now map[string]*tensor.Dense) bool {
	if len(was) != len(now) {
		return false
	}
	for k, t := range now {
		s, ok := was[k]
		if !ok || s.t != t || t == nil || s.data != t.Uintptr() || !slices.Equal(s.shape, t.Shape()) {
			return false
		}
	}
	return true
}

// intact reports whether every shard header still has the shape it was
// made with (rows of the tower, the rest of its source's shape): one an op
// reshaped in place is not fed again.
func (s *split) intact() bool {
	for i, sh := range s.shards {
		for _, part := range []struct {
			shards map[string]*tensor.Dense
			srcs   map[string]splitSource
		}{{sh.Features, s.features}, {sh.Labels, s.labels}} {
			for k, t := range part.shards {
				shape, src := t.Shape(), part.srcs[k].shape
				if len(shape) != len(src) || len(shape) == 0 || shape[0] != s.rows[i] || !slices.Equal(shape[1:], src[1:]) {
					return false
				}
			}
		}
	}
	return true
}
