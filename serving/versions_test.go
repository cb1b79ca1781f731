package serving

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/examples/linear/linreg"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// statusOf is the model_version_status a server answers with, each
// version as "version STATE" with ": message" when its status is not OK.
func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func statusOf(t *testing.T, res response) []string {
	t.Helper()
	if res.code != http.StatusOK {
		return []string{fmt.Sprintf("status %d: %s", res.code, errorOf(t, res.body))}
	}
	var st tfModelStatus
	if err := jsonUnmarshal(res.body, &st); err != nil {
		t.Fatalf("%v: %s", err, res.body)
	}
	var out []string
	for _, vs := range st.ModelVersionStatus {
		line := vs.Version + " " + vs.State
		if vs.Status.ErrorCode != "OK" {
			line += ": " + vs.Status.ErrorCode + " " + vs.Status.ErrorMessage
		}
		out = append(out, line)
	}
	return out
}

// TestVersionStates swaps versions in and checks the model status API:
// a replaced version is UNLOADING while a request uses it, then END; it
// is no longer served.
func TestVersionStates(t *testing.T) {
	v1, v2 := newFake(1, 1), newFake(2, 2)
	v1.entered, v1.gate = make(chan struct{}, 1), make(chan struct{})
	v2.closeErr = errors.New("disk on fire")
	src := &versions{next: make(chan Servable, 1)}
	src.next <- v1
	s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: src.load}}, Config{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(v1.gate) }) })
	held := predictAsync(hs, "/v1/models/m:predict", instances(1))
	await(t, "a request on version 1", v1.entered)

	get := func(path string) []string { return statusOf(t, do(t, hs, "GET", path, "")) }
	check := func(step, path string, want ...string) {
		t.Helper()
		if diff := cmp.Diff(want, get(path)); diff != "" {
			t.Errorf("%s: GET %s (-want +got):\n%s", step, path, diff)
		}
	}
	check("version 1 served", "/v1/models/m", "1 AVAILABLE")

	src.next <- v2
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	check("version 1 replaced, in use", "/v1/models/m", "2 AVAILABLE", "1 UNLOADING")
	check("version 1 replaced, in use", "/v1/models/m/versions/1", "1 UNLOADING")
	release.Do(func() { close(v1.gate) })
	wantPredictions(t, "the request on version 1", []float64{3}, await(t, "the request on version 1", held))
	s.drains.Wait()
	check("version 1 closed", "/v1/models/m/versions/1", "1 END")
	check("version 1 closed", "/v1/models/m/versions/2", "2 AVAILABLE")

	src.next <- newFake(3, 3)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	s.drains.Wait()
	check("version 2 failed to close", "/v1/models/m", "3 AVAILABLE", "2 END: UNKNOWN disk on fire", "1 END")
	check("a version never served", "/v1/models/m/versions/7", "status 404: Could not find version 7 of model m")
	for _, path := range []string{"/v1/models/m/versions/1:predict", "/v1/models/m/versions/1/metadata"} {
		method, body := "POST", instances(1)
		if strings.HasSuffix(path, "metadata") {
			method, body = "GET", ""
		}
		if res := do(t, hs, method, path, body); res.code != http.StatusNotFound || !strings.Contains(errorOf(t, res.body), "Specific(m, 1)") {
			t.Errorf("%s %s of an ended version: status %d: %s", method, path, res.code, res.body)
		}
	}

	// A version served again is AVAILABLE, not also END.
	src.next <- newFake(1, 1)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	s.drains.Wait()
	check("version 1 served again", "/v1/models/m", "3 END", "2 END: UNKNOWN disk on fire", "1 AVAILABLE")
}

// TestVersionStatesBounded: the status lists at most maxRetired replaced
// versions, the newest.
func TestVersionStatesBounded(t *testing.T) {
	src := &versions{next: make(chan Servable, 1)}
	src.next <- newFake(1, 1)
	s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: src.load}}, Config{})
	last := int64(maxRetired + 10)
	for v := int64(2); v <= last; v++ {
		src.next <- newFake(v, 1)
		if err := s.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	s.drains.Wait()
	want := []string{fmt.Sprintf("%d AVAILABLE", last)}
	for v := last - 1; v >= last-maxRetired; v-- {
		want = append(want, fmt.Sprintf("%d END", v))
	}
	if diff := cmp.Diff(want, statusOf(t, do(t, hs, "GET", "/v1/models/m", ""))); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// TestLabels serves a model whose labels name its newest version and an
// older one: every API takes /labels/{label} in place of
// /versions/{version}.
func TestLabels(t *testing.T) {
	stable, canary := newFake(1, 100), newFake(2, 200)
	loaded := map[int64]int{}
	s, hs := newTestServer(t, []ModelConfig{{
		Name:   "m",
		Loader: fixed(canary),
		LoadVersion: func(v int64) (Servable, error) {
			loaded[v]++
			if v == 1 {
				return stable, nil
			}
			return nil, fmt.Errorf("no version %d", v)
		},
		Labels: map[string]int64{"stable": 1, "canary": 2},
	}}, Config{})
	if diff := cmp.Diff(map[int64]int{1: 1}, loaded); diff != "" {
		t.Errorf("versions loaded by LoadVersion (-want +got):\n%s", diff)
	}
	unknown := "400 Unrecognized servable version label: nope"
	tests := []struct {
		name, method, path, body string
		want                     string // the status and the body, or the error
	}{
		{"status", "GET", "/v1/models/m", "", `200 ["2 AVAILABLE" "1 AVAILABLE"]`},
		{"status of a label", "GET", "/v1/models/m/labels/stable", "", `200 ["1 AVAILABLE"]`},
		{"status of the other label", "GET", "/v1/models/m/labels/canary", "", `200 ["2 AVAILABLE"]`},
		{"metadata of a label", "GET", "/v1/models/m/labels/stable/metadata", "", `200 model_spec version "1"`},
		{"predict on a label", "POST", "/v1/models/m/labels/stable:predict", instances(1), `200 {"predictions":[[102.0]]}`},
		{"predict on the other label", "POST", "/v1/models/m/labels/canary:predict", instances(1), `200 {"predictions":[[202.0]]}`},
		{"predict on the newest", "POST", "/v1/models/m:predict", instances(1), `200 {"predictions":[[202.0]]}`},
		{"predict on a labelled version by number", "POST", "/v1/models/m/versions/1:predict", instances(1), `200 {"predictions":[[102.0]]}`},
		{"regress on a label", "POST", "/v1/models/m/labels/stable:regress", `{"signature_name": "regress", "examples": [{"x": 1}]}`, `200 {"results":[102.0]}`},
		{"classify on a label", "POST", "/v1/models/m/labels/stable:classify", `{"signature_name": "classify", "examples": [{"x": 0.25}]}`,
			`200 {"results":[[["10",0.75],["20",0.25]]]}`},
		{"path case-insensitive", "POST", "/V1/MODELS/m/LABELS/stable:PREDICT", instances(1), `200 {"predictions":[[102.0]]}`},
		{"unknown label status", "GET", "/v1/models/m/labels/nope", "", unknown},
		{"unknown label metadata", "GET", "/v1/models/m/labels/nope/metadata", "", unknown},
		{"unknown label predict", "POST", "/v1/models/m/labels/nope:predict", instances(1), unknown},
		{"unknown label classify", "POST", "/v1/models/m/labels/nope:classify", `{}`, unknown},
		{"labels are case-sensitive", "POST", "/v1/models/m/labels/Stable:predict", instances(1), "400 Unrecognized servable version label: Stable"},
		{"label of an unknown model", "GET", "/v1/models/other/labels/stable", "", "404 Could not find any versions of model other"},
		{"label and version", "GET", "/v1/models/m/labels/stable/versions/1", "", "400 Malformed request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, hs, tc.method, tc.path, tc.body)
			got := fmt.Sprintf("%d %s", res.code, res.body)
			switch {
			case res.code != http.StatusOK:
				got = fmt.Sprintf("%d %s", res.code, errorOf(t, res.body))
			case strings.HasSuffix(tc.path, "/metadata"):
				var md tfModelMetadata
				if err := jsonUnmarshal(res.body, &md); err != nil {
					t.Fatal(err)
				}
				got = fmt.Sprintf("%d model_spec version %q", res.code, md.ModelSpec.Version)
			case tc.method == "GET":
				got = fmt.Sprintf("%d %q", res.code, statusOf(t, res))
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("answer %s, want %s", got, tc.want)
			}
		})
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !stable.closed.Load() || !canary.closed.Load() {
		t.Errorf("after Close: version 1 closed %v, version 2 closed %v", stable.closed.Load(), canary.closed.Load())
	}
}

// TestLabelsReload: reloads keep a labelled version served and retire the
// newest they replace unless a label names it; a Loader that gives a
// labelled version makes it the newest.
func TestLabelsReload(t *testing.T) {
	src := &versions{next: make(chan Servable, 1)}
	src.next <- newFake(2, 200)
	v1 := newFake(1, 100)
	s, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: src.load, LoadVersion: fixedVersion(v1), Labels: map[string]int64{"stable": 1}}}, Config{})
	tests := []struct {
		name   string
		next   *fakeServable
		status []string
		newest float64 // predict x=1 on the newest
	}{
		{"a new version", newFake(3, 300), []string{"3 AVAILABLE", "2 END", "1 AVAILABLE"}, 302},
		{"the labelled version", newFake(1, 999), []string{"3 END", "2 END", "1 AVAILABLE"}, 102},
		{"a new version after it", newFake(4, 400), []string{"4 AVAILABLE", "3 END", "2 END", "1 AVAILABLE"}, 402},
	}
	for _, tc := range tests {
		src.next <- tc.next
		if err := s.Reload(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		s.drains.Wait()
		if diff := cmp.Diff(tc.status, statusOf(t, do(t, hs, "GET", "/v1/models/m", ""))); diff != "" {
			t.Errorf("%s: status (-want +got):\n%s", tc.name, diff)
		}
		wantPredictions(t, tc.name+": the newest", []float64{tc.newest}, <-predictAsync(hs, "/v1/models/m:predict", instances(1)))
		wantPredictions(t, tc.name+": the label", []float64{102}, <-predictAsync(hs, "/v1/models/m/labels/stable:predict", instances(1)))
		if tc.next.version == 1 && !tc.next.closed.Load() {
			t.Errorf("%s: the second copy of version 1 was not closed", tc.name)
		}
	}
	if v1.closed.Load() {
		t.Error("the labelled version was closed while served")
	}
}

// TestLabelErrors covers the labels NewServer refuses.
func TestLabelErrors(t *testing.T) {
	failing := newFake(2, 1)
	tests := []struct {
		name   string
		model  ModelConfig
		want   string
		closed *fakeServable // closed by the failed NewServer
	}{
		{"a label with a dash", ModelConfig{Name: "m", Loader: fixed(newFake(1, 1)), Labels: map[string]int64{"a-b": 1}},
			`model "m": label "a-b": must be letters, digits and underscores`, nil},
		{"an empty label", ModelConfig{Name: "m", Loader: fixed(newFake(1, 1)), Labels: map[string]int64{"": 1}},
			`label "": must be letters`, nil},
		{"version 0", ModelConfig{Name: "m", Loader: fixed(newFake(1, 1)), Labels: map[string]int64{"a": 0}},
			`label "a" names version 0: versions are positive integers`, nil},
		{"another version without LoadVersion", ModelConfig{Name: "m", Loader: fixed(failing), Labels: map[string]int64{"old": 1}},
			`label "old" names version 1, the Loader gave version 2, and there is no LoadVersion to load another`, failing},
		{"LoadVersion fails", ModelConfig{Name: "m", Loader: fixed(newFake(2, 1)), LoadVersion: fixedVersion(newFake(3, 1)), Labels: map[string]int64{"old": 1}},
			`model "m": label "old": no version 1`, nil},
		{"LoadVersion gives another version", ModelConfig{Name: "m", Loader: fixed(newFake(2, 1)),
			LoadVersion: func(int64) (Servable, error) { return newFake(3, 1), nil }, Labels: map[string]int64{"old": 1}},
			`label "old": loading version 1 gave version 3`, nil},
		{"LoadVersion gives nothing", ModelConfig{Name: "m", Loader: fixed(newFake(2, 1)),
			LoadVersion: func(int64) (Servable, error) { return nil, nil }, Labels: map[string]int64{"old": 1}},
			`label "old": no export version 1`, nil},
		{"LoadVersion with a BaseDir", ModelConfig{Name: "m", BaseDir: t.TempDir(), Model: linregModel(), LoadVersion: fixedVersion(newFake(1, 1))},
			`model "m": has a LoadVersion and a BaseDir`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServer([]ModelConfig{tc.model}, Config{})
			if err == nil {
				s.Close()
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if tc.closed != nil && !tc.closed.closed.Load() {
				t.Error("the version loaded was not closed")
			}
		})
	}
}

// fixedVersion is a LoadVersion that loads only s.
func fixedVersion(s *fakeServable) func(int64) (Servable, error) {
	return func(v int64) (Servable, error) {
		if v != s.version {
			return nil, fmt.Errorf("no version %d", v)
		}
		return s, nil
	}
}

// linregModel is the linear-regression example's model on one CPU tower.
func linregModel() *replicate.Model {
	return replicate.ModelFn(linreg.Model, replicate.Config{Devices: []towers.Device{towers.CPU(0)}})
}
