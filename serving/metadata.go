package serving

// The model status and metadata endpoints, and the JSON of TensorFlow
// Serving's GetModelStatusResponse and GetModelMetadataResponse.

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/towerflow/towerflow/export"
)

type tfStatus struct {
	ErrorCode    string `json:"error_code"`
	ErrorMessage string `json:"error_message"`
}

type tfVersionStatus struct {
	Version string   `json:"version"`
	State   string   `json:"state"`
	Status  tfStatus `json:"status"`
}

type tfModelStatus struct {
	ModelVersionStatus []tfVersionStatus `json:"model_version_status"`
}

func (s *Server) serveStatus(w http.ResponseWriter, name, versionStr string) error {
	v, err := s.acquire(name, versionStr, true)
	if err != nil {
		return err
	}
	version := v.version
	v.release()
	body, _ := json.Marshal(tfModelStatus{ModelVersionStatus: []tfVersionStatus{{
		Version: strconv.FormatInt(version, 10),
		State:   "AVAILABLE",
		Status:  tfStatus{ErrorCode: "OK", ErrorMessage: ""},
	}}})
	writeJSON(w, http.StatusOK, body)
	return nil
}

type tfDim struct {
	Size string `json:"size"`
	Name string `json:"name"`
}

type tfTensorShape struct {
	Dim         []tfDim `json:"dim"`
	UnknownRank bool    `json:"unknown_rank"`
}

type tfTensorInfo struct {
	Dtype       string        `json:"dtype"`
	TensorShape tfTensorShape `json:"tensor_shape"`
	Name        string        `json:"name"`
}

type tfSignatureDef struct {
	Inputs     map[string]tfTensorInfo `json:"inputs"`
	Outputs    map[string]tfTensorInfo `json:"outputs"`
	MethodName string                  `json:"method_name"`
	Defaults   map[string]any          `json:"defaults"`
}

type tfModelSpec struct {
	Name          string `json:"name"`
	SignatureName string `json:"signature_name"`
	Version       string `json:"version"`
}

type tfSignatureDefMap struct {
	SignatureDef map[string]tfSignatureDef `json:"signature_def"`
}

type tfModelMetadata struct {
	ModelSpec tfModelSpec `json:"model_spec"`
	Metadata  struct {
		SignatureDef tfSignatureDefMap `json:"signature_def"`
	} `json:"metadata"`
}

func tensorInfos(m map[string]export.TensorInfo) map[string]tfTensorInfo {
	out := make(map[string]tfTensorInfo, len(m))
	for name, ti := range m {
		dt := "DT_INVALID"
		if d, ok := servedDtypes[ti.Dtype]; ok {
			dt = d.tf
		}
		dims := make([]tfDim, len(ti.Shape))
		for i, d := range ti.Shape {
			dims[i] = tfDim{Size: strconv.Itoa(d)}
		}
		out[name] = tfTensorInfo{Dtype: dt, TensorShape: tfTensorShape{Dim: dims}, Name: name}
	}
	return out
}

func (s *Server) serveMetadata(w http.ResponseWriter, name, versionStr string) error {
	body, err := s.metadata(name, versionStr)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// metadata returns the metadata answer of a model's version.
func (s *Server) metadata(name, versionStr string) ([]byte, error) {
	v, err := s.acquire(name, versionStr, false)
	if err != nil {
		return nil, err
	}
	defer v.release()
	var md tfModelMetadata
	md.ModelSpec = tfModelSpec{Name: name, Version: strconv.FormatInt(v.version, 10)}
	md.Metadata.SignatureDef.SignatureDef = map[string]tfSignatureDef{}
	for key, sig := range v.sigs {
		md.Metadata.SignatureDef.SignatureDef[key] = tfSignatureDef{
			Inputs:     tensorInfos(sig.Inputs),
			Outputs:    tensorInfos(sig.Outputs),
			MethodName: "tensorflow/serving/" + sig.Method,
			Defaults:   map[string]any{},
		}
	}
	return json.Marshal(md)
}
