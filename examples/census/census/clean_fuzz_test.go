package census

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzClean: any input cleans without a panic, into lines of exactly the
// schema's fields, none with spaces around it; or an error naming the
// file.
func FuzzClean(f *testing.F) {
	f.Add(dataLines)
	f.Add(testLines)
	f.Add("|1x3 Cross validator\n\n.\n, , ,\n")
	f.Fuzz(func(t *testing.T, in string) {
		var b bytes.Buffer
		n, err := Clean("fuzz", strings.NewReader(in), &b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if b.Len() == 0 {
			lines = nil
		}
		if len(lines) != n {
			t.Fatalf("%d rows said, %d written", n, len(lines))
		}
		for _, l := range lines {
			if c := strings.Count(l, ",") + 1; c != len(Schema) {
				t.Fatalf("line %q: %d fields", l, c)
			}
			for _, f := range strings.Split(l, ",") {
				if f != strings.TrimSpace(f) {
					t.Fatalf("line %q: field %q keeps spaces", l, f)
				}
			}
		}
	})
}
