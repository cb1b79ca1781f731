package wanterr

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors int
	fatal  bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }
func (r *recorder) Fatalf(string, ...any) { r.fatal = true }

func TestMentions(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
		got  recorder
	}{
		{"all mentioned", errors.New("tower 1: shape (2, 3)"), []string{"tower 1", "(2, 3)"}, recorder{}},
		{"one missing", errors.New("tower 1: shape (2, 3)"), []string{"tower 0", "(2, 3)"}, recorder{errors: 1}},
		{"two missing", errors.New("bad"), []string{"x", "y"}, recorder{errors: 2}},
		{"no error", nil, []string{"x"}, recorder{fatal: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			Mentions(&r, tc.err, tc.want...)
			if diff := cmp.Diff(tc.got, r, cmp.AllowUnexported(recorder{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
