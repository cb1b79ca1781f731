// Package wanterr is the check the tests of every package make of an
// error: that there is one, and that its message names what went wrong.
package wanterr

import (
	"strings"
	"testing"
)

// Mentions fails t at once when err is nil, and reports every string of
// want that err's message does not contain.
func Mentions(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}
