package serving

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
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

// BenchmarkPredictLarge serves one large predict request through the
// handler; -memprofile shows where the memory of the decode path goes.
func BenchmarkPredictLarge(b *testing.B) {
	body := largeInstances(2_700_000)
	s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(newFake(1, 1))}}, Config{MaxBodyBytes: 64 << 20, MaxBatchSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("POST", "/v1/models/m:predict", bytes.NewReader(body)))
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), `{"predictions":[[2.0],`) {
			b.Fatalf("status %d: %.200s", w.Code, w.Body.String())
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
