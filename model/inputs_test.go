package model_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/model"
)

func TestInputsGet(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 1), G.WithName("x"))
	features := model.Features{"x": x, "w": x}
	tests := []struct {
		name    string
		lookup  func(string) (*G.Node, error)
		get     func(string) *G.Node
		key     string
		want    *model.MissingInputError // nil: x is found
		wantMsg string
	}{
		{name: "feature there", lookup: features.Lookup, get: features.Get, key: "x"},
		{name: "feature missing", lookup: features.Lookup, get: features.Get, key: "z",
			want:    &model.MissingInputError{Kind: "feature", Name: "z", Have: []string{"w", "x"}},
			wantMsg: `feature "z" is not in the batch, which has features ["w" "x"]`},
		{name: "label missing", lookup: model.Labels{"y": x}.Lookup, get: model.Labels{"y": x}.Get, key: "z",
			want:    &model.MissingInputError{Kind: "label", Name: "z", Have: []string{"y"}},
			wantMsg: `label "z" is not in the batch, which has labels ["y"]`},
		{name: "labels in predict mode", lookup: model.Labels(nil).Lookup, get: model.Labels(nil).Get, key: "y",
			want:    &model.MissingInputError{Kind: "label", Name: "y"},
			wantMsg: `label "y" is not in the batch, which has no labels`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.lookup(tc.key)
			var got *model.MissingInputError
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("Lookup error %v is not a *MissingInputError", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Lookup error (-want +got):\n%s", diff)
			}
			if tc.want == nil {
				if n != x {
					t.Errorf("Lookup(%q) = %v, want x", tc.key, n)
				}
				if got := tc.get(tc.key); got != x {
					t.Errorf("Get(%q) = %v, want x", tc.key, got)
				}
				return
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("message %q, want %q", err.Error(), tc.wantMsg)
			}
			defer func() {
				r := recover()
				if diff := cmp.Diff(tc.want, r); diff != "" {
					t.Errorf("Get panicked with (-want +got):\n%s", diff)
				}
			}()
			tc.get(tc.key)
		})
	}
}
