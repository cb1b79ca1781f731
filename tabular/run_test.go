package tabular

import (
	"context"
	"io"
	"testing"

	"github.com/towerflow/towerflow/internal/wanterr"
)

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no files", Options{Infer: InferOptions{Label: "sex"}}, "want training and evaluation files"},
		{"CSV and TFRecord", Options{Train: []string{"testdata/penguins_sex/train.csv"}, Eval: []string{"eval.tfrecord"}, Infer: InferOptions{Label: "sex"}},
			"one CSV, the other TFRecord"},
		{"model", Options{Train: []string{"testdata/penguins_sex/train.csv"}, Eval: []string{"testdata/penguins_sex/test.csv"}, Infer: InferOptions{Label: "sex"}, Model: "forest"},
			`model "forest": want linear, dnn or wide_deep`},
		{"label", Options{Train: []string{"testdata/penguins_sex/train.csv"}, Eval: []string{"testdata/penguins_sex/test.csv"}, Infer: InferOptions{Label: "gender"}},
			`label "gender" is not a column of the data (columns: species, island, bill_length_mm`},
		{"missing file", Options{Train: []string{"testdata/none.csv"}, Eval: []string{"testdata/penguins_sex/test.csv"}, Infer: InferOptions{Label: "sex"}},
			"none.csv"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.o, io.Discard)
			wanterr.Mentions(t, err, tc.want)
		})
	}
}
