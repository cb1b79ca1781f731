package serving

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServerEndpoints(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{
		{Name: "m", Loader: fixed(newFake(3, 1))},
		{Name: "other", Loader: fixed(newFake(7, 0))},
	}, Config{})
	status3 := `{"model_version_status":[{"version":"3","state":"AVAILABLE","status":{"error_code":"OK","error_message":""}}]}`
	multi := `{"signature_name":"multi","instances":[` +
		`{"a":[1.5,2],"b":3,"k":-1,"u":255,"ok":true},` +
		`{"a":[0.25,0],"b":-4,"k":2,"u":0,"ok":false}]}`
	multiColumns := `{"signature_name":"multi","inputs":{"a":[[1.5,2],[0.25,0]],"b":[3,-4],"k":[-1,2],"u":[255,0],"ok":[true,false]}}`
	tests := []struct {
		name, method, path, body, want string
	}{
		{"status", "GET", "/v1/models/m", "", status3},
		{"status of a version", "GET", "/v1/models/m/versions/3", "", status3},
		{"status of another model", "GET", "/v1/models/other", "",
			`{"model_version_status":[{"version":"7","state":"AVAILABLE","status":{"error_code":"OK","error_message":""}}]}`},
		{"predict rows", "POST", "/v1/models/m:predict", `{"instances": [[1.0], [2.5]]}`, `{"predictions":[[3.0],[6.0]]}`},
		{"predict rows, version", "POST", "/v1/models/m/versions/3:predict", `{"instances": [[1]]}`, `{"predictions":[[3.0]]}`},
		{"predict rows, other model", "POST", "/v1/models/other:predict", `{"instances": [[1]]}`, `{"predictions":[[2.0]]}`},
		{"predict rows, named", "POST", "/v1/models/m:predict", `{"instances": [{"x": [1]}, {"x": [-0.5]}]}`, `{"predictions":[[3.0],[0.0]]}`},
		{"predict, default signature by name", "POST", "/v1/models/m:predict",
			`{"signature_name": "serving_default", "instances": [[1]]}`, `{"predictions":[[3.0]]}`},
		{"predict, empty signature name", "POST", "/v1/models/m:predict", `{"signature_name": "", "instances": [[1]]}`, `{"predictions":[[3.0]]}`},
		{"predict columns", "POST", "/v1/models/m:predict", `{"inputs": [[1.0], [2.5]]}`, `{"outputs":[[3.0],[6.0]]}`},
		{"predict columns, named", "POST", "/v1/models/m:predict", `{"inputs": {"x": [[1.0]]}}`, `{"outputs":[[3.0]]}`},
		{"predict rows, several inputs and outputs", "POST", "/v1/models/m:predict", multi,
			`{"predictions":[{"b2":6,"not":false,"sum":257.5},{"b2":-8,"not":true,"sum":2.25}]}`},
		{"predict columns, several inputs and outputs", "POST", "/v1/models/m:predict", multiColumns,
			`{"outputs":{"b2":[6,-8],"not":[false,true],"sum":[257.5,2.25]}}`},
		{"predict on a regress signature", "POST", "/v1/models/m:predict", `{"signature_name": "regress", "instances": [[1]]}`,
			`{"predictions":[[3.0]]}`},
		{"predict NaN and infinities", "POST", "/v1/models/m:predict", `{"instances": [[NaN], [Infinity], [-Infinity]]}`,
			`{"predictions":[[NaN],[Infinity],[-Infinity]]}`},
		{"predict large and small numbers", "POST", "/v1/models/m:predict", `{"instances": [[1e20], [-5e-1], [1.25E2]]}`,
			`{"predictions":[[2e+20],[0.0],[251.0]]}`},
		{"predict, path case-insensitive", "POST", "/V1/MODELS/m/Versions/3:PREDICT", `{"instances": [[1]]}`, `{"predictions":[[3.0]]}`},
		{"predict, unknown keys ignored", "POST", "/v1/models/m:predict", `{"instances": [[1]], "comment": {"any": [1, "thing"]}}`,
			`{"predictions":[[3.0]]}`},
		{"classify with classes", "POST", "/v1/models/m:classify",
			`{"signature_name": "classify", "examples": [{"x": 0.25}, {"x": [0.5]}]}`,
			`{"results":[[["10",0.75],["20",0.25]],[["10",0.5],["20",0.5]]]}`},
		{"classify with scores only, context", "POST", "/v1/models/m/versions/3:classify",
			`{"signature_name": "classify_scores", "context": {"x": 0.25}, "examples": [{}, {"extra": "ignored"}]}`,
			`{"results":[[["",0.75],["",0.25]],[["",0.75],["",0.25]]]}`},
		{"classify with class names of the scores", "POST", "/v1/models/m:classify",
			`{"signature_name": "classify_names", "examples": [{"x": 0.25}]}`,
			`{"results":[[["cat",0.75],["dog",0.25]]]}`},
		{"classify with class names of the classes", "POST", "/v1/models/m:classify",
			`{"signature_name": "classify_index", "examples": [{"x": 0.25}, {"x": 0.5}]}`,
			`{"results":[[["bird",0.75],["cat",0.25]],[["bird",0.5],["cat",0.5]]]}`},
		{"predict on a signature with class names", "POST", "/v1/models/m:predict",
			`{"signature_name": "classify_index", "instances": [[0.25]]}`,
			`{"predictions":[{"classes":[2,0],"scores":[0.75,0.25]}]}`},
		{"regress", "POST", "/v1/models/m:regress", `{"signature_name": "regress", "examples": [{"x": 1}, {"x": [2.5]}]}`,
			`{"results":[3.0,6.0]}`},
		{"regress, booleans as 0/1 and back in integer and bool features", "POST", "/v1/models/m:regress",
			`{"signature_name": "regress_flags", "context": {"u": true}, "examples": [{"flag": 1, "n": [true, 2], "f": 0}, {"flag": false, "n": [0, false], "f": 1}]}`,
			`{"results":[121.5,1100.0]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, hs, tc.method, tc.path, tc.body)
			if res.code != http.StatusOK {
				t.Fatalf("status %d, body %s", res.code, res.body)
			}
			if diff := cmp.Diff(tc.want, res.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if ct := res.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// TestRouteErrors covers the answers to a path, model, version or method
// the API does not serve, and to a failing Run.
func TestRouteErrors(t *testing.T) {
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, Config{})
	const predict = "/v1/models/m:predict"
	checkErrors(t, hs, []errorCase{
		// Paths, models, versions, methods.
		{"unknown model status", "GET", "/v1/models/nope", "", 404, "Could not find any versions of model nope"},
		{"unknown version status", "GET", "/v1/models/m/versions/7", "", 404, "Could not find version 7 of model m"},
		{"version 0 status", "GET", "/v1/models/m/versions/0", "", 404, "Could not find version 0 of model m"},
		{"version 0 predict", "POST", "/v1/models/m/versions/0:predict", `{"instances":[[1]]}`, 404, "Specific(m, 0)"},
		{"unknown model metadata", "GET", "/v1/models/nope/metadata", "", 404, "Servable not found for request: Latest(nope)"},
		{"unknown version metadata", "GET", "/v1/models/m/versions/2/metadata", "", 404, "Servable not found for request: Specific(m, 2)"},
		{"unknown model predict", "POST", "/v1/models/nope:predict", `{"instances":[[1]]}`, 404, "Servable not found for request: Latest(nope)"},
		{"unknown version predict", "POST", "/v1/models/m/versions/7:predict", `{"instances":[[1]]}`, 404, "Specific(m, 7)"},
		{"unknown version classify", "POST", "/v1/models/m/versions/7:classify", `{}`, 404, "Specific(m, 7)"},
		{"version overflow", "POST", "/v1/models/m/versions/99999999999999999999:predict", `{}`, 400, "Failed to convert version"},
		{"no model name", "GET", "/v1/models", "", 400, "Missing model name in request."},
		{"malformed path", "GET", "/v1/foo", "", 400, "Malformed request: GET /v1/foo"},
		{"version not a number", "POST", "/v1/models/m/versions/x:predict", `{}`, 400, "Malformed request"},
		{"unknown verb", "POST", "/v1/models/m:explain", `{}`, 400, "Malformed request"},
		{"outside the API", "GET", "/healthz", "", 404, "Not found"},
		{"GET predict", "GET", predict, "", 405, "use POST"},
		{"POST status", "POST", "/v1/models/m", "", 405, "use GET"},
		{"DELETE metadata", "DELETE", "/v1/models/m/metadata", "", 405, "use GET"},
		// Errors from Run.
		{"run: bad input", "POST", predict, `{"instances": [[-1000]]}`, 400, "x too small"},
		{"run: failure", "POST", predict, `{"instances": [[-1001]]}`, 500, "device on fire"},
		{"run: panic", "POST", predict, `{"instances": [[-999]]}`, 500, "internal error: panic: boom"},
		{"a class outside the class names", "POST", "/v1/models/m:classify", `{"signature_name": "classify_index", "examples": [{"x": 7}]}`, 500,
			`classify output "classes" holds class 3, outside the 3 class names`},
	})
}

func TestServerLogsFailures(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			var logs syncBuffer
			cfg := Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			if batching {
				cfg.MaxBatchSize, cfg.BatchTimeout = 1000, time.Nanosecond
			}
			s, err := NewServer([]ModelConfig{{Name: "m", Loader: fixed(newFake(3, 1))}}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(s)
			defer hs.Close()
			for _, tc := range []struct {
				x    string
				code int
				want string
			}{{"-999", 500, "panic: boom"}, {"-1001", 500, "device on fire"}, {"-1000", 400, ""}} {
				res := do(t, hs, "POST", "/v1/models/m:predict", `{"instances": [[`+tc.x+`]]}`)
				if res.code != tc.code {
					t.Errorf("x=%s: status %d, want %d: %s", tc.x, res.code, tc.code, res.body)
				}
				if tc.want != "" && !strings.Contains(logs.String(), tc.want) {
					t.Errorf("x=%s: the log does not mention %q:\n%s", tc.x, tc.want, logs.String())
				}
			}
			if !strings.Contains(logs.String(), "goroutine") {
				t.Errorf("the panic is logged without its stack:\n%s", logs.String())
			}
			if strings.Contains(logs.String(), "x too small") {
				t.Errorf("a 400 is logged:\n%s", logs.String())
			}
			// The panicking requests released the version: Close does not hang.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
