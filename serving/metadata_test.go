package serving

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/export"
)

func TestServerMetadata(t *testing.T) {
	f := newFake(3, 1)
	f.sigs = map[string]export.Signature{
		"serving_default": f.sigs["serving_default"],
		"classify":        f.sigs["classify"],
	}
	_, hs := newTestServer(t, []ModelConfig{{Name: "m", Loader: fixed(f)}}, Config{})
	want := `{
	  "model_spec": {"name": "m", "signature_name": "", "version": "3"},
	  "metadata": {"signature_def": {"signature_def": {
	    "classify": {
	      "inputs": {"x": {"dtype": "DT_DOUBLE", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}], "unknown_rank": false}, "name": "x"}},
	      "outputs": {
	        "classes": {"dtype": "DT_INT64", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "2", "name": ""}], "unknown_rank": false}, "name": "classes"},
	        "scores": {"dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "2", "name": ""}], "unknown_rank": false}, "name": "scores"}
	      },
	      "method_name": "tensorflow/serving/classify",
	      "defaults": {}
	    },
	    "serving_default": {
	      "inputs": {"x": {"dtype": "DT_DOUBLE", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}], "unknown_rank": false}, "name": "x"}},
	      "outputs": {"y": {"dtype": "DT_DOUBLE", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}], "unknown_rank": false}, "name": "y"}},
	      "method_name": "tensorflow/serving/predict",
	      "defaults": {}
	    }
	  }}}
	}`
	for _, path := range []string{"/v1/models/m/metadata", "/v1/models/m/versions/3/metadata"} {
		t.Run(path, func(t *testing.T) {
			res := do(t, hs, "GET", path, "")
			if res.code != http.StatusOK {
				t.Fatalf("status %d, body %s", res.code, res.body)
			}
			var got, wantv any
			if err := json.Unmarshal([]byte(res.body), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(want), &wantv); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantv, got); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
		})
	}
}
