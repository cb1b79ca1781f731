//go:build mpi

package estimator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/collective"
	"github.com/towerflow/towerflow/internal/mpitest"
)

// asRank runs run as this MPI rank (with the rank's own seed) and writes
// the result for the parent test: the body of every test below when
// mpitest.Child().
func asRank(t *testing.T, run acrossRun, edit func(rank int, run *acrossRun)) {
	t.Helper()
	c, err := collective.MPI()
	if err != nil {
		t.Fatal(err)
	}
	run.Seed = uint64(100 + c.Rank())
	if edit != nil {
		edit(c.Rank(), &run)
	}
	res := trainAcross(context.Background(), c, run)
	if err := mpitest.WriteResult(c.Rank(), res); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMPITrainLikeOneDevice: under mpirun, N processes × M towers (each
// process its own seed, its part of every batch, even or uneven) end where
// one process with one tower does on the whole batches.
func TestMPITrainLikeOneDevice(t *testing.T) {
	tests := []struct {
		procs int
		run   acrossRun
	}{
		{2, acrossRun{Towers: 2, Optimizer: "momentum", Dtype: "float64", Rows: 60, Batch: 15, Steps: 6}},
		{2, acrossRun{Towers: 1, Optimizer: "adam", Dtype: "float32", Rows: 64, Batch: 16, Steps: 6}},
		{2, acrossRun{Towers: 1, Optimizer: "sgd", Dtype: "float32", Rows: 63, Batch: 21, Steps: 5}},
		{4, acrossRun{Towers: 1, Optimizer: "sgd", Dtype: "float64", Rows: 66, Batch: 11, Steps: 5}},
		{4, acrossRun{Towers: 2, Optimizer: "adam", Dtype: "float64", Rows: 72, Batch: 18, Steps: 4}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%dx%d_%s_%s_batch%d", tc.procs, tc.run.Towers, tc.run.Optimizer, tc.run.Dtype, tc.run.Batch), func(t *testing.T) {
			if mpitest.Child() {
				asRank(t, tc.run, nil)
				return
			}
			checkLikeOneDevice(t, tc.procs, tc.run, mpitest.ReadResults[acrossResult](t, mpitest.Run(t, tc.procs), tc.procs))
		})
	}
}

// TestMPIWeightAveraging: averaging every K steps under mpirun gives what
// the Local group gives, which TestWeightAveraging checks against the mean
// computed by hand.
func TestMPIWeightAveraging(t *testing.T) {
	run := acrossRun{Towers: 1, Optimizer: "momentum", Dtype: "float64", Rows: 64, Batch: 16, Every: 3, Steps: 6}
	if mpitest.Child() {
		asRank(t, run, nil)
		return
	}
	want := runLocal(ranks(2, run))
	got := mpitest.ReadResults[acrossResult](t, mpitest.Run(t, 2), 2)
	if d := cmp.Diff(want, got, approx("float64")); d != "" {
		t.Errorf("weight averaging under mpirun differs from the Local group's (-want +got):\n%s", d)
	}
}

// TestMPIRankZeroWritesAndResumes: under mpirun only rank 0 writes its
// model directory, and a second job resumes exactly where one job of twice
// the steps is (rank 1 with an empty directory and another seed).
func TestMPIRankZeroWritesAndResumes(t *testing.T) {
	run := acrossRun{Towers: 1, Optimizer: "adam", Dtype: "float64", Rows: 64, Batch: 16, Steps: 3}
	if mpitest.Child() {
		asRank(t, run, func(rank int, r *acrossRun) {
			r.ModelDir = filepath.Join(os.Getenv("ACROSS_DIR"), fmt.Sprint(rank))
			if os.Getenv("ACROSS_RESUME") != "" && rank == 1 {
				r.ModelDir, r.Seed = filepath.Join(os.Getenv("ACROSS_DIR"), "fresh"), 999
			}
		})
		return
	}
	twice := run
	twice.Rounds = 2
	want := runLocal(ranks(2, twice))
	dir := t.TempDir()
	mpitest.Run(t, 2, "ACROSS_DIR="+dir)
	got := mpitest.ReadResults[acrossResult](t, mpitest.Run(t, 2, "ACROSS_DIR="+dir, "ACROSS_RESUME=1"), 2)
	for r := range 2 {
		if got[r].Err != "" || got[r].Step != 6 {
			t.Fatalf("rank %d: resumed to step %d, error %q; want step 6", r, got[r].Step, got[r].Err)
		}
		if d := cmp.Diff(want[r].Weights, got[r].Weights, approx("float64")); d != "" {
			t.Errorf("rank %d: the resumed job differs from an uninterrupted run (-want +got):\n%s", r, d)
		}
	}
	for _, sub := range []string{"1", "fresh"} {
		if entries, err := os.ReadDir(filepath.Join(dir, sub)); err == nil && len(entries) > 0 {
			t.Errorf("rank 1 wrote into %s: %v", sub, entries)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "0", "checkpoint")); err != nil {
		t.Errorf("rank 0 wrote no checkpoint: %v", err)
	}
}

// TestMPIFailingRank: a rank whose input fails stops every rank with an
// error naming it; a rank that dies stops the job (mpirun ends the
// others) — never a hang (mpitest bounds the job).
func TestMPIFailingRank(t *testing.T) {
	run := acrossRun{Towers: 1, Optimizer: "sgd", Dtype: "float64", Rows: 64, Batch: 16, Steps: 50}
	tests := []struct {
		name string
		edit func(rank int, r *acrossRun)
		// want: each rank's error; or, for a job that dies, what
		// mpirun's output says.
		want []string
		dies string
	}{
		{"input fails", func(rank int, r *acrossRun) {
			if rank == 1 {
				r.FailAt = 3
			}
		}, []string{"process rank 1 failed", "input at step 3: input failed on purpose"}, ""},
		{"model function fails", func(rank int, r *acrossRun) {
			if rank == 0 {
				r.FailBuild = true
			}
		}, []string{"model function failed on purpose", "process rank 0 failed"}, ""},
		{"context cancelled", func(rank int, r *acrossRun) {
			if rank == 1 {
				r.CancelAt = 3
			}
		}, []string{"process rank 1 failed", "context canceled"}, ""},
		{"process exits", func(rank int, r *acrossRun) {
			if rank == 1 {
				r.ExitAt = 3
			}
		}, nil, "exited"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if mpitest.Child() {
				asRank(t, run, tc.edit)
				return
			}
			if tc.dies != "" {
				_, out, err := mpitest.RunErr(t, 2)
				if err == nil || !strings.Contains(string(out), tc.dies) {
					t.Errorf("a dying rank: job error %v, output:\n%s\nwant a failed job whose output says %q", err, out, tc.dies)
				}
				return
			}
			got := mpitest.ReadResults[acrossResult](t, mpitest.Run(t, 2), 2)
			for r, g := range got {
				if !strings.Contains(g.Err, tc.want[r]) || g.Err == "" {
					t.Errorf("rank %d: error %q, want one containing %q", r, g.Err, tc.want[r])
				}
			}
		})
	}
}
