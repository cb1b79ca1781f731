package cifar_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/towerflow/towerflow/examples/cifar10/cifar"
)

// FuzzDecode: decoding any bytes as a file of CIFAR-10 records gives an
// error or whole examples with labels 0..9, which Encode writes back as
// the very same bytes; it never panics. Seeds are the files Write writes.
//
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 60s -fuzzminimizetime 1s ./examples/cifar10/cifar
func FuzzDecode(f *testing.F) {
	dir := f.TempDir()
	if err := cifar.Write(dir, cifar.Test, cifar.Synthetic(2, 1)); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, cifar.Test.Files()[0]))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)-1])
	bad := bytes.Clone(b)
	bad[cifar.RecordSize] = cifar.Classes
	f.Add(bad)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, file []byte) {
		var s cifar.Set
		if err := cifar.Decode(bytes.NewReader(file), "f", &s); err != nil {
			return
		}
		if len(s.Pixels) != s.Len()*cifar.ImageSize {
			t.Fatalf("%d examples, %d pixels", s.Len(), len(s.Pixels))
		}
		var again bytes.Buffer
		if err := cifar.Encode(&again, &s); err != nil {
			t.Fatalf("encoding the decoded examples: %v", err)
		}
		if !bytes.Equal(again.Bytes(), file) {
			t.Fatalf("the decoded examples encode to %d other bytes than the file's %d", again.Len(), len(file))
		}
	})
}
