package towers_test

import (
	"testing"

	"github.com/towerflow/towerflow/towers"
)

func TestParsePrecision(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    towers.Precision
		wantErr bool
	}{
		{"float32", towers.FullPrecision, false},
		{"", towers.FullPrecision, false},
		{"bf16", towers.BFloat16, false},
		{"bfloat16", towers.BFloat16, false},
		{"fp16", 0, true},
	} {
		got, err := towers.ParsePrecision(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ParsePrecision(%q) = %v, %v; want %v, error %t", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil && tc.in != "" && tc.in != "fp32" && tc.in != "bf16" && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}
