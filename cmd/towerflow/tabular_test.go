package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestTabularUsageErrors: a bad tabular command line exits with status 2
// and says what is wrong, before reading any data.
func TestTabularUsageErrors(t *testing.T) {
	data := []string{"-train", "../../tabular/testdata/penguins_sex/train.csv", "-eval", "../../tabular/testdata/penguins_sex/test.csv"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no label", data, "tabular needs -train, -eval and -label"},
		{"no eval", []string{"-train", "a.csv", "-label", "y"}, "tabular needs -train, -eval and -label"},
		{"model", append(data, "-label", "sex", "-model", "forest"), `-model: model "forest": want linear, dnn or wide_deep`},
		{"head", append(data, "-label", "sex", "-head", "ranking"), `-head: head "ranking": want binary, multiclass or regression`},
		{"batch", append(data, "-label", "sex", "-batch", "0"), "-batch 0"},
		{"serve without model_dir", append(data, "-label", "sex", "-serve", ":8501"), "-serve needs -model_dir"},
		{"arguments", append(data, "-label", "sex", "extra"), `tabular takes no arguments, got ["extra"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"tabular"}, tc.args...), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr.String(), tc.want)
			}
		})
	}
}

// TestTabularBadData: a label that is not a column is an error (exit 1)
// naming the columns there are.
func TestTabularBadData(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"tabular", "-train", "../../tabular/testdata/penguins_sex/train.csv",
		"-eval", "../../tabular/testdata/penguins_sex/test.csv", "-label", "gender"}, &stdout, &stderr)
	want := `label "gender" is not a column of the data (columns: species, island`
	if code != 1 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, stderr.String(), want)
	}
}

// TestTabularServeAddress: an address -serve cannot listen on is an
// error (exit 1) before any training: the model directory stays empty.
func TestTabularServeAddress(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"tabular", "-train", "../../tabular/testdata/penguins_sex/train.csv",
		"-eval", "../../tabular/testdata/penguins_sex/test.csv", "-label", "sex", "-model_dir", dir, "-serve", "localhost"}, &stdout, &stderr)
	want := "-serve localhost: listen tcp: address localhost: missing port in address"
	if code != 1 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, stderr.String(), want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("the model directory holds %d entries, want none", len(entries))
	}
}

// TestExampleRequest: the request -serve logs to try is the first
// evaluation record's raw values, without the label.
func TestExampleRequest(t *testing.T) {
	got := exampleRequest([]string{"../../tabular/testdata/penguins_sex/test.csv"}, "sex")
	want := `{"examples":[{"bill_depth_mm":17.4,"bill_length_mm":39.5,"body_mass_g":3800,"flipper_length_mm":186,"island":"Torgersen","species":"Adelie"}]}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
