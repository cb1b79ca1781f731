package exportdir

import "encoding/json"

// The preprocessor of an export (estimator.Preprocess): the transformation
// of raw records into the model's inputs, which serving runs before the
// model.
const (
	// AssetsExtraDir holds the files of an export beside its model, as
	// TensorFlow's SavedModel assets.extra.
	AssetsExtraDir = "assets.extra"
	// PreprocessorFile is the preprocessor's file (a Preprocessor), in
	// AssetsExtraDir.
	PreprocessorFile = AssetsExtraDir + "/towerflow_preprocessor.json"
	// MaxPreprocessorBytes bounds the preprocessor's file, which loading
	// reads whole: far above the vocabularies and statistics of real
	// feature transformations.
	MaxPreprocessorBytes = 1 << 30
)

// Preprocessor is the content of PreprocessorFile: the kind of
// preprocessor, by which a loader is registered
// (export.RegisterPreprocessor), and its configuration, the JSON the
// preprocessor marshalled itself to.
type Preprocessor struct {
	Kind   string          `json:"kind"`
	Config json.RawMessage `json:"config"`
}
