package columns

import (
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/export"
)

// The export of a model trained on a Transformer's batches records it
// (estimator.Preprocess); export.Load rebuilds it by this package's
// loader, which importing the package registers.
func init() {
	export.RegisterPreprocessor(Kind, func(config []byte) (dataset.Parser, error) {
		t, err := Load(config)
		if err != nil {
			return nil, err
		}
		return t, nil
	})
}
