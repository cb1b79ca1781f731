package columns

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/sharding"
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

// fuzzKeys are the raw features everyKind's columns read.
var fuzzKeys = []string{"age", "pos", "income", "constant", "region", "word", "day", "occupation", "tag", "tag_w", "city", "home", "y", "w"}

// fuzzExamples makes up to three examples from data: each feature from
// a key, a kind (int64s, floats, bytes, an empty list), a count and that
// many values; a zero byte starts the next example.
func fuzzExamples(data []byte) []dataset.Example {
	exs := []dataset.Example{{}}
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	for len(data) > 0 && len(exs) <= 3 {
		b := next()
		if b == 0 {
			exs = append(exs, dataset.Example{})
			continue
		}
		key := fuzzKeys[int(b)%len(fuzzKeys)]
		kind, n := next()%4, int(next()%4)
		var f dataset.Feature
		switch kind {
		case 0:
			f.Int64s = []int64{}
			for range n {
				f.Int64s = append(f.Int64s, int64(int8(next())))
			}
		case 1:
			f.Floats = []float32{}
			for range n {
				f.Floats = append(f.Floats, float32(int8(next()))/4)
			}
		case 2:
			f.Bytes = [][]byte{}
			for range n {
				f.Bytes = append(f.Bytes, []byte([]string{"", "a", "b", "paris", "south", "hi", "yes", "no", "x"}[next()%9]))
			}
		}
		exs[len(exs)-1][key] = f
	}
	return exs
}

// FuzzParseRows: a Transformer makes the same batch, or fails, whether
// it parses records at once (Parse) or each on its own, then puts them
// together (PrepareRow, ParseRows), and never panics.
func FuzzParseRows(f *testing.F) {
	tr, exs := everyKind(f)
	f.Add([]byte{1, 1, 1, 40, 0, 5, 2, 2, 3, 5, 0, 13, 2, 1, 6})
	f.Add([]byte{9, 0, 2, 5, 200, 10, 1, 2, 8, 16})
	f.Fuzz(func(t *testing.T, data []byte) {
		batch := fuzzExamples(data)
		if len(data) == 0 {
			batch = exs
		}
		want, werr := tr.Parse(batch)
		rows := make([]any, len(batch))
		var gerr error
		for i, ex := range batch {
			if rows[i], gerr = tr.PrepareRow(ex); gerr != nil {
				break
			}
		}
		var got sharding.Batch
		if gerr == nil {
			got, gerr = tr.ParseRows(rows)
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("examples %v: Parse error %v, rows error %v", batch, werr, gerr)
		}
		if werr == nil {
			if diff := cmp.Diff(plainBatch(want), plainBatch(got)); diff != "" {
				t.Fatalf("examples %v (-Parse +rows):\n%s", batch, diff)
			}
		}
	})
}
