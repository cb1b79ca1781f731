package estimator

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/towerflow/towerflow/internal/exportdir"
	"github.com/towerflow/towerflow/internal/guard"
)

// Preprocessor is a transformation of raw records into the model's
// inputs that an export records (Preprocess), so that serving runs it
// before the model: the dataset.Parser the model was trained through,
// such as a *columns.Transformer. PreprocessKind names the kind, by
// which package export finds the loader that rebuilds it from its JSON
// (export.RegisterPreprocessor); MarshalJSON is its configuration
// (vocabularies, boundaries, statistics), which that loader reads back.
type Preprocessor interface {
	PreprocessKind() string
	MarshalJSON() ([]byte, error)
}

// Preprocess records p in the export: its kind and its JSON are written
// into the version directory (assets.extra/towerflow_preprocessor.json),
// with the rest of the version and in its manifest. export.Load rebuilds
// it, and serving then takes raw feature values, which it runs through
// it before the model. The export's serving inputs are still the model's
// inputs: the tensors p makes.
func Preprocess(p Preprocessor) ExportOption { return func(o *exportOptions) { o.pre = p } }

// preprocessorFile returns the content of the preprocessor's file.
func preprocessorFile(p Preprocessor) ([]byte, error) {
	var (
		kind   string
		config []byte
	)
	err := guard.Call(fmt.Sprintf("preprocessor %T", p), "PreprocessKind and MarshalJSON", func() (err error) {
		kind = p.PreprocessKind()
		config, err = p.MarshalJSON()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("preprocessor %T: %w", p, err)
	}
	if kind == "" || strings.ContainsFunc(kind, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return nil, fmt.Errorf("preprocessor %T: kind %q: want a non-empty name without spaces", p, kind)
	}
	if !json.Valid(config) {
		return nil, fmt.Errorf("preprocessor %T (kind %q): MarshalJSON gave invalid JSON", p, kind)
	}
	data, err := json.MarshalIndent(exportdir.Preprocessor{Kind: kind, Config: config}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("preprocessor %T (kind %q): %w", p, kind, err)
	}
	return append(data, '\n'), nil
}
