package columns

import (
	"context"

	"github.com/towerflow/towerflow/dataset"
)

// Fit reads src to its end once and returns the Transformer of cfg with
// every column fitted to the data: Standardize's mean and standard
// deviation, BucketizedQuantiles' boundaries, VocabularyFromData's
// vocabulary. Columns that need nothing from the data are kept as they
// are. An error names the column and the record (counted from 0) it is
// about; a cancelled ctx stops the pass with ctx's error.
func Fit(ctx context.Context, src dataset.Source, cfg Config) (*Transformer, error) {
	return nil, ErrNotImplemented
}
