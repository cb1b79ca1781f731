package serving

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServerBatchesMerge(t *testing.T) {
	type req struct {
		sig string
		xs  []float64
		// wait: wait until this request joined a batch before sending the
		// next one.
		wait bool
	}
	tests := []struct {
		name    string
		max     int
		reqs    []req
		batches []int // the rows of each Run, sorted
	}{
		{"flush when full", 4, []req{{"", []float64{1}, false}, {"", []float64{2}, false}, {"", []float64{3, 4}, false}}, []int{4}},
		{"a request that does not fit starts the next batch", 4,
			[]req{{"", []float64{1, 2, 3}, true}, {"", []float64{4, 5}, true}, {"", []float64{6, 7}, false}}, []int{3, 4}},
		{"a full request runs alone", 2, []req{{"", []float64{1, 2}, false}}, []int{2}},
		{"signatures are batched apart", 2,
			[]req{{"", []float64{1}, true}, {"regress", []float64{2}, true}, {"", []float64{3}, false}, {"regress", []float64{4}, false}}, []int{2, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(3, 1)
			f.batches = make(chan int, 100)
			// An hour: only full batches run, whatever the timing.
			s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(f)}}, Config{MaxBatchSize: tc.max, BatchTimeout: time.Hour})
			joined := make(chan int, 100)
			s.batcher.enqueued = func(key batchKey, rows int) { joined <- rows }
			var pending []<-chan outcome
			for _, r := range tc.reqs {
				body := instances(r.xs...)
				if r.sig != "" {
					body = strings.Replace(body, "{", `{"signature_name": "`+r.sig+`", `, 1)
				}
				pending = append(pending, predictAsync(hs, "/v1/models/m:predict", body))
				if r.wait {
					if rows := <-joined; tc.name == "signatures are batched apart" && rows != 1 {
						t.Errorf("a request joined a batch of another signature: %d rows", rows)
					}
				}
			}
			for i, r := range tc.reqs {
				wantPredictions(t, fmt.Sprintf("request %v", r.xs), twoXPlusOne(r.xs...), <-pending[i])
			}
			close(f.batches)
			var got []int
			for n := range f.batches {
				got = append(got, n)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.batches, got); diff != "" {
				t.Errorf("batch sizes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServerBatchTimeout(t *testing.T) {
	f := newFake(3, 1)
	f.batches = make(chan int, 100)
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(f)}}, Config{MaxBatchSize: 8, BatchTimeout: time.Millisecond})
	// A lone request is run when the timeout passes.
	if diff := cmp.Diff(twoXPlusOne(5, 6), predictions(t, do(t, hs, "POST", "/v1/models/m:predict", instances(5, 6)))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := <-f.batches; n != 2 {
		t.Errorf("batch of %d rows, want 2", n)
	}
}

func TestServerCloseRunsOpenBatches(t *testing.T) {
	f := newFake(3, 1)
	s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(f)}}, Config{MaxBatchSize: 8, BatchTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	joined := make(chan int, 1)
	s.batcher.enqueued = func(batchKey, int) { joined <- 1 }
	done := predictAsync(hs, "/v1/models/m:predict", instances(1))
	<-joined
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantPredictions(t, "the request in the open batch", twoXPlusOne(1), <-done)
	if !f.closed.Load() {
		t.Error("Close did not close the version")
	}
	if res := do(t, hs, "POST", "/v1/models/m:predict", instances(1)); res.code != http.StatusServiceUnavailable {
		t.Errorf("after Close: status %d: %s", res.code, res.body)
	}
}

// TestBatchesKeepVersionsApart: a request that arrives after a reload
// never joins a batch of the version replaced: each version answers
// differently, and each request is answered by the version it arrived on.
func TestBatchesKeepVersionsApart(t *testing.T) {
	src := &versions{next: make(chan Servable, 1)}
	src.next <- newFake(1, 1000)
	// An hour: only full batches run, and the open one when closing.
	s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: src.load}}, Config{MaxBatchSize: 2, BatchTimeout: time.Hour})
	t.Cleanup(func() { s.Close() }) // runs the batches left open by a failure
	joined := make(chan int64, 8)
	s.batcher.enqueued = func(key batchKey, _ int) { joined <- key.v.version }
	first := predictAsync(hs, "/v1/models/m:predict", instances(1))
	if v := await(t, "the first request joining a batch", joined); v != 1 {
		t.Fatalf("the first request joined a batch of version %d", v)
	}
	src.next <- newFake(2, 2000)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	// Two requests fill a batch of version 2, which runs.
	second := predictAsync(hs, "/v1/models/m:predict", instances(2))
	third := predictAsync(hs, "/v1/models/m:predict", instances(3))
	wantPredictions(t, "the second request, on version 2", []float64{2004}, await(t, "the second request", second))
	wantPredictions(t, "the third request, on version 2", []float64{2006}, await(t, "the third request", third))
	// Closing runs the batch of version 1.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantPredictions(t, "the first request, on version 1", []float64{1002}, await(t, "the first request", first))
}
