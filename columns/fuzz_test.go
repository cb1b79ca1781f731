package columns

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/towerflow/towerflow/dataset"
)

// FuzzLoad: Load never panics on any input; what it loads encodes to
// JSON that loads back to the same JSON, and parses records (or says
// what is wrong with them) without panicking.
func FuzzLoad(f *testing.F) {
	tr, _ := everyKind(f)
	good, err := json.Marshal(tr)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"kind":"towerflow/columns","version":1,"columns":[{"type":"crossed","buckets":3,"hash_key":"7","keys":[{"type":"raw","key":"a"},{"type":"identity","key":"b","buckets":4}]}],"label":{"key":"y","dimension":2}}`))
	f.Add([]byte(`{"kind":"towerflow/columns","version":1,"columns":[{"type":"embedding","categorical":{"type":"weighted","categorical":{"type":"vocabulary","key":"v","vocabulary":["a"],"oov_buckets":2},"weight_key":"w"},"dimension":2,"combiner":"mean","init_stddev":0.5,"shared":"s","shared_columns":[{"type":"hash_bucket","key":"h","buckets":3}]}]}`))
	exs := []dataset.Example{
		{"a": by("x"), "b": in(1, 2), "v": by("a", "b"), "w": fl(1, 2), "age": fl(3), "y": fl(1, 2), "region": by("south")},
		{},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Load(data)
		if err != nil {
			return
		}
		enc, err := json.Marshal(tr)
		if err != nil {
			t.Fatalf("loaded %s, cannot encode it: %v", data, err)
		}
		back, err := Load(enc)
		if err != nil {
			t.Fatalf("loaded %s, encoded it as %s, which does not load: %v", data, enc, err)
		}
		again, err := json.Marshal(back)
		if err != nil || !bytes.Equal(enc, again) {
			t.Fatalf("JSON %s encodes as %s after a round trip (%v)", enc, again, err)
		}
		width := 0
		for _, d := range tr.dense {
			if d.numeric != nil {
				width += d.numeric.Dimension()
			} else {
				width += d.cat.NumBuckets()
			}
		}
		if width <= 1<<16 {
			_, _ = tr.Parse(exs) // bad records are errors; a panic fails the fuzz
		}
	})
}
