package serving

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEcho(t *testing.T) {
	long := strings.Repeat("a", maxEcho) + "é" + "b"
	tests := []struct {
		name, in, want string
	}{
		{"short", "abc", "abc"},
		{"at the limit", strings.Repeat("a", maxEcho), strings.Repeat("a", maxEcho)},
		{"over", strings.Repeat("a", maxEcho+1), strings.Repeat("a", maxEcho) + fmt.Sprintf("… (%d bytes)", maxEcho+1)},
		{"cut before a character", strings.Repeat("a", maxEcho-1) + "éz", strings.Repeat("a", maxEcho-1) + fmt.Sprintf("… (%d bytes)", maxEcho+2)},
		{"character after the limit", long, strings.Repeat("a", maxEcho) + fmt.Sprintf("… (%d bytes)", len(long))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, echo(tc.in)); diff != "" {
				t.Errorf("echo (-want +got):\n%s", diff)
			}
		})
	}
}

// TestErrorsEchoBounded sends requests whose names and values are 1 MiB:
// each error answer quotes at most maxEcho bytes of them, and says how
// long the input was where it has it whole.
func TestErrorsEchoBounded(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1)), Labels: map[string]int64{"stable": 3}}}, Config{})
	const n = 1 << 20
	big := strings.Repeat("s", n)
	bigURL := strings.Repeat("s", 64<<10) // within net/http's header limit
	digits := strings.Repeat("9", n)
	tests := []struct {
		name, method, path, body string
		code                     int
		want                     string // in the message
	}{
		{"signature name", "POST", "/v1/models/m:predict", `{"signature_name": "` + big + `", "instances": [1]}`, 400, fmt.Sprintf("… (%d bytes)", n)},
		{"model name", "GET", "/v1/models/" + bigURL, "", 404, fmt.Sprintf("… (%d bytes)", len(bigURL))},
		{"model name, predict", "POST", "/v1/models/" + bigURL + ":predict", instances(1), 404, fmt.Sprintf("… (%d bytes)", len(bigURL))},
		{"label", "GET", "/v1/models/m/labels/" + bigURL, "", 400, fmt.Sprintf("… (%d bytes)", len(bigURL))},
		{"version", "GET", "/v1/models/m/versions/" + strings.Repeat("9", 64<<10), "", 400, fmt.Sprintf("… (%d bytes)", 64<<10)},
		{"path", "GET", "/v1/" + bigURL, "", 400, fmt.Sprintf("… (%d bytes)", len(bigURL)+4)},
		{"unknown input", "POST", "/v1/models/m:predict", `{"instances": [{"x": 1, "` + big + `": 1}]}`, 400, fmt.Sprintf("… (%d bytes)", n)},
		{"number", "POST", "/v1/models/m:predict", `{"signature_name": "multi", "instances": [{"a": [1, 2], "b": 1, "k": 1, "u": ` + digits + `, "ok": true}]}`, 400, fmt.Sprintf("… (%d bytes)", n)},
		{"string value", "POST", "/v1/models/m:predict", `{"instances": ["` + big + `"]}`, 400, "…"},
		{"signature name of another type", "POST", "/v1/models/m:predict", `{"signature_name": ["` + big + `"], "instances": [1]}`, 400, "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, hs, tc.method, tc.path, tc.body)
			if res.code != tc.code {
				t.Errorf("status %d, want %d", res.code, tc.code)
			}
			msg := errorOf(t, res.body)
			if len(msg) > 2*maxEcho+300 {
				t.Errorf("error of %d bytes: %.300s...", len(msg), msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %.600q does not contain %q", msg, tc.want)
			}
		})
	}
}
