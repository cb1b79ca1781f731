package replicate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/numeric"
	"github.com/towerflow/towerflow/metrics"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/towers"
)

// declared is one variable of rank 0's store, as SyncFromRoot sends it.
type declared struct {
	Name      string `json:"name"`
	Dtype     string `json:"dtype"`
	Shape     []int  `json:"shape"`
	Trainable bool   `json:"trainable,omitempty"`
	Colocate  string `json:"colocate,omitempty"`
}

// syncDtypes are the dtypes a synchronized variable may have.
var syncDtypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int, tensor.Int32, tensor.Int64}

// SyncFromRoot makes every process's store rank 0's: the variables rank 0
// holds (model variables, optimizer slots, the global step — a restored
// checkpoint's too) are created where missing and set to rank 0's values,
// so every process starts identical whatever its seed and whether it can
// read the model directory. Every process calls it at the same point (the
// estimator does at the start of Train and Evaluate). A variable whose
// shape or dtype differs from rank 0's is an error naming it and the rank.
// Once the engine has built Train towers, the processes first compare
// what they built (see Config.Processes): a difference is a
// ModelMismatchError on every process, before any variable is taken.
func (e *Engine) SyncFromRoot(ctx context.Context) error {
	x := e.x
	if x == nil {
		return nil
	}
	ctx, cancel := x.bound(ctx)
	defer cancel()
	// The Train build, once there is one, is compared here: before the
	// first step and before rank 0's variables are taken.
	if _, _, err := x.exchange(ctx, statusOK, header{}, 0, model.Train, x.built[model.Train]); err != nil {
		return fmt.Errorf("sync variables from rank 0: %w", err)
	}
	var manifest []byte
	if x.comm.Rank() == 0 {
		var err error
		if manifest, err = json.Marshal(declare(e.store.Variables())); err != nil {
			return fmt.Errorf("sync variables from rank 0: %w", err) // cannot happen: plain fields
		}
	}
	manifest, err := collective.BroadcastBytes(ctx, x.comm, 0, manifest)
	if err != nil {
		return fmt.Errorf("sync variables from rank 0: %w", x.broke(err))
	}
	vars, local := e.receive(manifest)
	status := statusOK
	if local != nil {
		status = statusFailed
	}
	if _, _, err := x.exchange(ctx, status, header{}, 0, model.Train, nil); err != nil {
		if local != nil {
			return fmt.Errorf("sync variables from rank 0: rank %d: %w", x.comm.Rank(), local)
		}
		return fmt.Errorf("sync variables from rank 0: %w", err)
	}
	if err := x.broadcastVariables(ctx, vars); err != nil {
		return fmt.Errorf("sync variables from rank 0: %w", err)
	}
	return nil
}

// declare describes variables for the other ranks, by name.
func declare(vs []*towers.Variable) []declared {
	out := make([]declared, len(vs))
	for i, v := range vs {
		out[i] = declared{Name: v.Name(), Dtype: v.Dtype().Name(), Shape: v.Shape(), Trainable: v.Trainable(), Colocate: v.Colocated()}
	}
	slices.SortFunc(out, func(a, b declared) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// receive gets or creates the variables rank 0 declared, in its order.
func (e *Engine) receive(manifest []byte) ([]*towers.Variable, error) {
	var ds []declared
	if err := json.Unmarshal(manifest, &ds); err != nil {
		return nil, fmt.Errorf("rank 0's variables: %w", err)
	}
	vars := make([]*towers.Variable, len(ds))
	for i, d := range ds {
		k := slices.IndexFunc(syncDtypes, func(dt tensor.Dtype) bool { return dt.Name() == d.Dtype })
		if k < 0 {
			return nil, fmt.Errorf("variable %q has dtype %s, which cannot be sent between processes", d.Name, d.Dtype)
		}
		v, _, err := e.store.GetOrCreate(towers.VarSpec{Name: d.Name, Dtype: syncDtypes[k], Shape: tensor.Shape(d.Shape), Trainable: d.Trainable, Colocate: d.Colocate})
		if err != nil {
			return nil, fmt.Errorf("variable %q as rank 0 has it (%s %v): %w", d.Name, d.Dtype, d.Shape, err)
		}
		vars[i] = v
	}
	return vars, nil
}

// broadcastVariables copies rank 0's values of vars into every rank's,
// packed into buckets of at most the fusion's bucket bytes.
func (x *across) broadcastVariables(ctx context.Context, vars []*towers.Variable) error {
	total := 0
	for _, v := range vars {
		total += len(bytesOf(v.Data()))
	}
	if total == 0 {
		return nil
	}
	root := x.comm.Rank() == 0
	buf := make([]byte, min(total, x.fusion.Bucket()))
	type part struct {
		b  []byte
		at int
	}
	var parts []part
	at := 0
	flush := func() error {
		if err := x.comm.Broadcast(ctx, 0, buf[:at]); err != nil {
			return x.broke(err)
		}
		if !root {
			for _, p := range parts {
				copy(p.b, buf[p.at:])
			}
		}
		parts, at = parts[:0], 0
		return nil
	}
	for _, v := range vars {
		b := bytesOf(v.Data())
		for lo := 0; lo < len(b); {
			hi := min(len(b), lo+len(buf)-at)
			if root {
				copy(buf[at:], b[lo:hi])
			}
			parts = append(parts, part{b: b[lo:hi], at: at})
			at += hi - lo
			lo = hi
			if at == len(buf) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if at > 0 {
		return flush()
	}
	return nil
}

// bytesOf is the memory of a numeric slice.
func bytesOf(s any) []byte {
	switch d := s.(type) {
	case []float32:
		return asBytes(d)
	case []float64:
		return asBytes(d)
	case []int:
		return asBytes(d)
	case []int32:
		return asBytes(d)
	case []int64:
		return asBytes(d)
	}
	return nil
}

func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

// average replaces the model's variables — and with Averaging.Slots every
// other float variable, the optimizer slots — by their mean over the
// processes, in one fused all-reduce after a header.
func (e *Engine) average(ctx context.Context) error {
	x := e.x
	if _, _, err := x.exchange(ctx, statusOK, header{}, 0, model.Train, x.built[model.Train]); err != nil {
		return fmt.Errorf("average weights: %w", err)
	}
	vars := e.store.Variables()
	slices.SortFunc(vars, func(a, b *towers.Variable) int { return cmp.Compare(a.Name(), b.Name()) })
	segs := x.segs[:0]
	share := 1 / float64(x.comm.Size())
	for _, v := range vars {
		if numeric.IsFloat(v.Dtype()) && (v.FromModel() || x.avg.Slots) {
			segs = append(segs, collective.Segment{Data: v.Data(), Scale: share})
		}
	}
	x.segs = segs
	if err := x.allReduce(ctx, segs); err != nil {
		return fmt.Errorf("average weights: %w", err)
	}
	return nil
}

// ReduceMetrics sums the metric states of every process, and extra (the
// caller's own additive numbers, such as a loss sum and a batch count), so
// that every process's Metrics are those of the whole evaluation. Every
// process calls it once at the end of an evaluation; a process with other
// metrics, or none, is an error naming it, and one whose latest Eval build
// differs from rank 0's a ModelMismatchError on every process (see
// Config.Processes). Without processes it does nothing.
func (e *Engine) ReduceMetrics(ctx context.Context, extra []float64) error {
	x := e.x
	if x == nil {
		return nil
	}
	ctx, cancel := x.bound(ctx)
	defer cancel()
	if len(e.metrics) > 0 {
		if err := metrics.ReduceIntoFirst(e.metrics); err != nil {
			return err
		}
	}
	segs := x.segs[:0]
	size := len(extra)
	if len(e.metrics) > 0 {
		for _, name := range slices.Sorted(maps.Keys(e.metrics[0])) {
			st := e.metrics[0][name].State()
			segs = append(segs, collective.Segment{Data: st, Scale: 1})
			size += len(st)
		}
	}
	segs = append(segs, collective.Segment{Data: extra, Scale: 1})
	x.segs = segs
	_, sizes, err := x.exchange(ctx, statusOK, header{}, float64(size), model.Eval, x.built[model.Eval])
	if err != nil {
		return fmt.Errorf("reduce metrics: %w", err)
	}
	for r, n := range sizes {
		if int(n) != size {
			x.open = false
			return fmt.Errorf("reduce metrics: rank %d has %d metric state elements, rank %d %d: every process must evaluate the same metrics", r, int(n), x.comm.Rank(), size)
		}
	}
	if err := x.allReduce(ctx, segs); err != nil {
		return fmt.Errorf("reduce metrics: %w", err)
	}
	return nil
}
