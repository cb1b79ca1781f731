// Package exportdir is the on-disk format of an export version directory,
// shared by the Estimator, which writes it, and package export, which loads
// and serves it:
//
//	<base>/<version>/
//	    signatures.json   the serving signatures (Signatures)
//	    variables/        the variables, in the checkpoint format
//	                      (estimator/checkpoint: one .npy each + manifest)
//	    manifest.json     every file of the version with its SHA-256 (Manifest)
//	    assets.extra/towerflow_preprocessor.json
//	                      the preprocessor of raw records, if any (Preprocessor)
//
// Versions are positive integers; the newest is the largest, as in
// TensorFlow Serving's model base path. A version is written under a
// temporary name and renamed into place, so a half-written one is never seen.
package exportdir

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

// MaxExampleBytes bounds the size of one example of an input or output a
// signature declares. Loading builds the model on one example of zeros of
// every input, and Export does too before writing: a damaged
// signatures.json, or a serving input too large, must not make either
// allocate without bound, or compute a size that overflows.
const MaxExampleBytes = 1 << 30

// File names inside a version directory.
const (
	SignaturesFile = "signatures.json"
	ManifestFile   = "manifest.json"
	VariablesDir   = "variables"
)

// Bounds on the metadata files readers read whole, far above any real
// one: the manifest lists each file of a version in about 130 bytes, the
// signatures each input, output and class name in a few dozen.
const (
	MaxManifestBytes   = 64 << 20
	MaxSignaturesBytes = 64 << 20
)

// TensorInfo describes one input or output: its dtype as TensorFlow names
// it ("float32", "float64", "int64", "int32", "bool", "uint8") and its shape
// with -1 for the variable batch dimension.
type TensorInfo struct {
	Dtype string `json:"dtype"`
	Shape []int  `json:"shape"`
	// Sparse marks a sparse input: a variable-length list of values per
	// example (a bag of ids, or their weights), at most Shape[1] of them;
	// Shape is [-1, max values per example]. It is fed as a
	// sharding.SparseCOO whose entry j of row r has index [r, j]. Outputs
	// are never sparse.
	Sparse bool `json:"sparse,omitempty"`
}

// Signature is one servable function of the model.
type Signature struct {
	// Method is "predict", "classify" or "regress".
	Method  string                `json:"method"`
	Inputs  map[string]TensorInfo `json:"inputs"`
	Outputs map[string]TensorInfo `json:"outputs"`
	// ClassNames names the classes of a classify signature (see
	// model.ClassificationOutput): the labels of the "scores" columns,
	// or of the integer indexes of the "classes" output.
	ClassNames []string `json:"class_names,omitempty"`
}

// CheckClassNames checks a signature's class names against its method and
// outputs: only a classify signature has them; with a "classes" output,
// its dtype is an integer one (indexes into the names); without one, there
// is a name for each column of "scores".
func CheckClassNames(sig Signature) error {
	if len(sig.ClassNames) == 0 {
		return nil
	}
	if sig.Method != "classify" {
		return fmt.Errorf("class names on a %s signature: only classify signatures have them", sig.Method)
	}
	if classes, ok := sig.Outputs["classes"]; ok {
		switch classes.Dtype {
		case "int64", "int32", "uint8":
			return nil
		}
		return fmt.Errorf("class names with a \"classes\" output of dtype %s: want integer class indexes", classes.Dtype)
	}
	scores, ok := sig.Outputs["scores"]
	if !ok {
		return errors.New("class names without a \"scores\" or \"classes\" output")
	}
	k := 1
	switch len(scores.Shape) {
	case 1:
	case 2:
		k = scores.Shape[1]
	default:
		return fmt.Errorf("class names with \"scores\" of shape %v: want [batch] or [batch, classes]", scores.Shape)
	}
	if k != len(sig.ClassNames) {
		return fmt.Errorf("%d class names for %d \"scores\" columns: want one for each", len(sig.ClassNames), k)
	}
	return nil
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
