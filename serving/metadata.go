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

// serveStatus answers the model status API: every version the model
// serves or served, the newest first, or the one spec asks for.
func (s *Server) serveStatus(w http.ResponseWriter, name string, spec versionSpec) error {
	m, want, specific, err := s.find(name, spec, true)
	if err != nil {
		return err
	}
	var st tfModelStatus
	for _, vs := range m.states() {
		if specific && vs.version != want {
			continue
		}
		status := tfStatus{ErrorCode: "OK", ErrorMessage: ""}
		if vs.err != nil {
			status = tfStatus{ErrorCode: "UNKNOWN", ErrorMessage: vs.err.Error()}
		}
		st.ModelVersionStatus = append(st.ModelVersionStatus, tfVersionStatus{Version: strconv.FormatInt(vs.version, 10), State: vs.state, Status: status})
	}
	if len(st.ModelVersionStatus) == 0 {
		if !specific && m.latestVersion() == 0 {
			return errClosed
		}
		return notFound(name, want, specific, true)
	}
	body, _ := json.Marshal(st)
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

// tfTensorInfo is TensorFlow's TensorInfo: a dense tensor has a name, a
// sparse one (export.TensorInfo.Sparse) its COO encoding's three names
// instead.
type tfTensorInfo struct {
	Dtype       string        `json:"dtype"`
	TensorShape tfTensorShape `json:"tensor_shape"`
	Name        string        `json:"name,omitempty"`
	CooSparse   *tfCooSparse  `json:"coo_sparse,omitempty"`
}

type tfCooSparse struct {
	ValuesTensorName     string `json:"values_tensor_name"`
	IndicesTensorName    string `json:"indices_tensor_name"`
	DenseShapeTensorName string `json:"dense_shape_tensor_name"`
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
		info := tfTensorInfo{Dtype: dt, TensorShape: tfTensorShape{Dim: dims}, Name: name}
		if ti.Sparse {
			info.Name, info.CooSparse = "", &tfCooSparse{ValuesTensorName: name + "/values", IndicesTensorName: name + "/indices", DenseShapeTensorName: name + "/dense_shape"}
		}
		out[name] = info
	}
	return out
}

func (s *Server) serveMetadata(w http.ResponseWriter, name string, spec versionSpec) error {
	body, err := s.metadata(name, spec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// metadata returns the metadata answer of a model's version.
func (s *Server) metadata(name string, spec versionSpec) ([]byte, error) {
	v, err := s.acquire(name, spec, false)
	if err != nil {
		return nil, err
	}
	defer v.release()
	var md tfModelMetadata
	md.ModelSpec = tfModelSpec{Name: name, Version: strconv.FormatInt(v.version, 10)}
	md.Metadata.SignatureDef.SignatureDef = map[string]tfSignatureDef{}
	for key, sig := range v.sigs {
		inputs := tensorInfos(sig.Inputs)
		if v.raw != nil { // the raw features requests carry
			inputs = v.raw.tensorInfos()
		}
		md.Metadata.SignatureDef.SignatureDef[key] = tfSignatureDef{
			Inputs:     inputs,
			Outputs:    tensorInfos(sig.Outputs),
			MethodName: "tensorflow/serving/" + sig.Method,
			Defaults:   map[string]any{},
		}
	}
	return json.Marshal(md)
}
