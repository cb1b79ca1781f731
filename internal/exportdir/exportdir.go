// Package exportdir is the on-disk format of an export version directory,
// shared by the Estimator, which writes it, and package export, which loads
// and serves it:
//
//	<base>/<version>/
//	    signatures.json   the serving signatures (Signatures)
//	    variables/        the variables, in the checkpoint format
//	                      (estimator/checkpoint: one .npy each + manifest)
//	    manifest.json     every file of the version with its SHA-256 (Manifest)
//
// Versions are positive integers; the newest is the largest, as in
// TensorFlow Serving's model base path. A version is written under a
// temporary name and renamed into place, so a half-written one is never seen.
package exportdir

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
)

// Sum returns the hex SHA-256 of everything r yields, as manifest.json
// records it, and the number of bytes read.
func Sum(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Format names this layout in signatures.json and manifest.json.
const Format = "towerflow-export-v1"

// File names inside a version directory.
const (
	SignaturesFile = "signatures.json"
	ManifestFile   = "manifest.json"
	VariablesDir   = "variables"
)

// TensorInfo describes one input or output: its dtype as TensorFlow names
// it ("float32", "float64", "int64", "int32", "bool", "uint8") and its shape
// with -1 for the variable batch dimension.
type TensorInfo struct {
	Dtype string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// Signature is one servable function of the model.
type Signature struct {
	// Method is "predict", "classify" or "regress".
	Method  string                `json:"method"`
	Inputs  map[string]TensorInfo `json:"inputs"`
	Outputs map[string]TensorInfo `json:"outputs"`
}

// Signatures is the content of signatures.json.
type Signatures struct {
	Format     string               `json:"format"`
	Step       int64                `json:"global_step"`
	Signatures map[string]Signature `json:"signatures"`
}

// File is one file of a version with its checksum.
type File struct {
	Path   string `json:"path"` // relative, slash-separated
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Manifest is the content of manifest.json.
type Manifest struct {
	Format string `json:"format"`
	Files  []File `json:"files"`
}
