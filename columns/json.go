package columns

// MarshalJSON encodes the Transformer: its columns with everything they
// were fitted to (vocabularies, boundaries, statistics, hash settings),
// its label and example weight. Load decodes it.
func (t *Transformer) MarshalJSON() ([]byte, error) { return nil, ErrNotImplemented }

// Load decodes a Transformer encoded by MarshalJSON.
func Load(config []byte) (*Transformer, error) { return nil, ErrNotImplemented }
