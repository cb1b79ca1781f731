package tower_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/internal/tower"
	"github.com/towerflow/towerflow/towers"
)

// Two towers share masters through their own headers: an update of the
// master is seen by both on their next run, and their runs are concurrent.
func TestTowersShareMasters(t *testing.T) {
	s := towers.NewStore(towers.StoreConfig{})
	s0 := towers.NewScope(0, 2, towers.CPU(0), s, nil)
	t0 := tower.New(s0, nil)
	t1 := tower.New(towers.NewScope(1, 2, towers.CPU(1), s, s0), nil)
	var outs []*G.Node
	for _, tw := range []*tower.Tower{t0, t1} {
		w := tw.MustVariable("w", tensor.Float64, tensor.Shape{2, 2}, towers.Constant(1))
		x, err := tw.Input("x", tensor.Float64, tensor.Shape{3, 2})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, G.Must(G.Sum(G.Must(G.Mul(x, w)))))
		if err := tw.Compile(); err != nil {
			t.Fatal(err)
		}
		if err := tw.Feed("x", tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 1, 1, 1, 1, float64(tw.Index())}))); err != nil {
			t.Fatal(err)
		}
	}
	ts := []*tower.Tower{t0, t1}
	run := func() []float64 {
		if err := tower.RunAll(context.Background(), ts, (*tower.Tower).Run); err != nil {
			t.Fatal(err)
		}
		return []float64{outs[0].Value().Data().(float64), outs[1].Value().Data().(float64)}
	}
	if diff := cmp.Diff([]float64{10, 12}, run()); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
	w, _ := s.Lookup("w")
	// w = [[3 1] [1 1]]: a row [a b] of x adds 4a+2b... summed: 16 and 18.
	w.Data().([]float64)[0] = 3
	if diff := cmp.Diff([]float64{16, 18}, run()); diff != "" {
		t.Errorf("after master update (-want +got):\n%s", diff)
	}
	if n, _ := t1.VariableNode("w"); n.Name() != "tower_1/w" {
		t.Errorf("tower 1 node name %q", n.Name())
	}
}

func TestRunAllNamesPanickingTower(t *testing.T) {
	s := towers.NewStore(towers.StoreConfig{})
	ts := []*tower.Tower{tower.New(towers.NewScope(0, 1, towers.CPU(0), s, nil), nil), tower.New(towers.NewScope(1, 1, towers.CPU(1), s, nil), nil)}
	err := tower.RunAll(context.Background(), ts, func(tw *tower.Tower) error {
		if tw.Index() == 1 {
			panic("bad shape")
		}
		return nil
	})
	var pe *tower.PanicError
	if !errors.As(err, &pe) || pe.Where != "tower 1 (/device:CPU:1)" || !strings.Contains(err.Error(), "bad shape") {
		t.Fatalf("got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tower.RunAll(ctx, ts, func(*tower.Tower) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}
}

// TestRunAllAbortsGroups: a tower that fails, by an error or a panic,
// while another waits for it in a group of their build, aborts the group:
// the waiting tower returns instead of waiting for ever, and the next run
// (which resets the groups) sums again.
func TestRunAllAbortsGroups(t *testing.T) {
	for _, fail := range []string{"error", "panic"} {
		t.Run(fail, func(t *testing.T) {
			s := towers.NewStore(towers.StoreConfig{})
			s0 := towers.NewScope(0, 2, towers.CPU(0), s, nil)
			ts := []*tower.Tower{tower.New(s0, nil), tower.New(towers.NewScope(1, 2, towers.CPU(1), s, s0), nil)}
			g := s0.Group("moments") // as an op does while its graph is built
			broken := true
			var waited error
			sums := make([][]float64, 2)
			run := func(tw *tower.Tower) error {
				if tw.Index() == 1 && broken {
					if fail == "panic" {
						panic("tower 1 broke")
					}
					return errors.New("tower 1 broke")
				}
				sum, err := g.AllSum(tw.Index(), []float64{float64(tw.Index() + 1), 10})
				if tw.Index() == 0 {
					waited = err
				}
				sums[tw.Index()] = slices.Clone(sum)
				return err
			}
			err := tower.RunAll(context.Background(), ts, run)
			if err == nil || !strings.Contains(err.Error(), "tower 1 broke") {
				t.Fatalf("RunAll = %v, want tower 1's failure", err)
			}
			if !errors.Is(waited, towers.ErrGroupAborted) {
				t.Errorf("tower 0's AllSum = %v, want ErrGroupAborted", waited)
			}
			broken = false
			if err := tower.RunAll(context.Background(), ts, run); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([][]float64{{3, 20}, {3, 20}}, sums); diff != "" {
				t.Errorf("sums after a reset (-want +got):\n%s", diff)
			}
		})
	}
}
