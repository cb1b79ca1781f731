package guard_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/towerflow/towerflow/internal/guard"
)

// TestCall: a panic becomes a *PanicError naming where and what, with the
// stack of the panic and the panic value, which it unwraps to when it is
// an error; a returned error and no error pass through.
func TestCall(t *testing.T) {
	tests := []struct {
		name    string
		fn      func() error
		wantMsg string // "": no error
		isEOF   bool   // unwraps to io.EOF
		panics  bool
	}{
		{"no error", func() error { return nil }, "", false, false},
		{"error", func() error { return io.EOF }, "EOF", true, false},
		{"panic", func() error { panic("boom") }, "hook *x.h: panic during BeforeStep: boom", false, true},
		{"panic with an error", func() error { panic(io.EOF) }, "hook *x.h: panic during BeforeStep: EOF", true, true},
		{"nil pointer", func() error { var p *int; return errors.New(string(rune(*p))) }, "hook *x.h: panic during BeforeStep: runtime error: invalid memory address or nil pointer dereference", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := guard.Call("hook *x.h", "BeforeStep", tc.fn)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantMsg, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if errors.Is(err, io.EOF) != tc.isEOF {
				t.Errorf("errors.Is(%v, io.EOF) = %t, want %t", err, !tc.isEOF, tc.isEOF)
			}
			var pe *guard.PanicError
			if errors.As(err, &pe) != tc.panics {
				t.Fatalf("a *PanicError: %t, want %t", !tc.panics, tc.panics)
			}
			if pe != nil && !strings.Contains(string(pe.Stack), "guard_test.TestCall") {
				t.Errorf("the stack does not show the panicking function:\n%s", pe.Stack)
			}
		})
	}
}
