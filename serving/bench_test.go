package serving

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// largeInstances is a predict body of rows single-value instances, about
// 5.6 bytes a row: 2.7M rows make the 15 MB request of issue 12.
func largeInstances(rows int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"instances": [`)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("[0.5]")
	}
	b.WriteString("]}")
	return b.Bytes()
}

// The benchmarks serve one large predict request through the handler, and
// report the bytes and allocations of a request, and the peak RSS of the
// process (run one benchmark per process to read it: -bench names one);
// -memprofile shows where the memory of the decode path goes.
//
//	go test -run '^$' -bench 'PredictLarge$' -benchtime 3x -memprofile mem.prof ./serving

// BenchmarkPredictLarge: 2.7M rows of one value (16 MB), the request of
// issue 12, with no limit on the rows: the decode path's worst case.
func BenchmarkPredictLarge(b *testing.B) {
	benchPredict(b, newFake(1, 1), largeInstances(2_700_000), Config{MaxBodyBytes: 64 << 20, MaxBatchSize: 1 << 30}, http.StatusOK)
}

// BenchmarkPredictLargeRefused: the same request with the default limits:
// refused (400) once its parse passes what 8192 rows hold.
func BenchmarkPredictLargeRefused(b *testing.B) {
	benchPredict(b, newFake(1, 1), largeInstances(2_700_000), Config{}, http.StatusBadRequest)
}

// BenchmarkPredictWide: 2000 rows of 784 float32 values (an MNIST batch,
// 8 MB): a large request within the default limits.
func BenchmarkPredictWide(b *testing.B) {
	var body bytes.Buffer
	body.WriteString(`{"instances": [`)
	for i := range 2000 {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteByte('[')
		for j := range 784 {
			if j > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, "%.3f", float64((i+j)%1000)/1000)
		}
		body.WriteByte(']')
	}
	body.WriteString("]}")
	wide := &stubServable{method: "predict", inShape: []int{-1, 784}, inDtype: "float32", out: func(rows int) map[string]*tensor.Dense {
		return map[string]*tensor.Dense{"y": tensor.New(tensor.WithShape(rows, 1), tensor.WithBacking(make([]float64, rows)))}
	}}
	benchPredict(b, wide, body.Bytes(), Config{}, http.StatusOK)
}

func benchPredict(b *testing.B, sv Servable, body []byte, cfg Config, code int) {
	s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(sv)}}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("POST", "/v1/models/m:predict", bytes.NewReader(body)))
		if w.Code != code {
			b.Fatalf("status %d, want %d: %.200s", w.Code, code, w.Body.String())
		}
	}
	if peak, ok := peakRSS(); ok {
		b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	}
}

// peakRSS returns the process's peak resident memory (VmHWM), where
// /proc/self/status tells it.
func peakRSS() (int64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
