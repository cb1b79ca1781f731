package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
	"github.com/towerflow/towerflow/serving"
	"github.com/towerflow/towerflow/tabular"
)

const tabularSynopsis = "-train FILES -eval FILES -label COLUMN [-positive VALUE] [-head binary|multiclass|regression] [-ignore COLUMNS] [-model linear|dnn|wide_deep] [-steps N] [-batch N] [-towers N] [-model_dir DIR] [-export DIR] [-serve ADDR]"

// tabularCmd is the tabular command: it infers feature columns and a head
// from CSV or TFRecord files, trains a canned model, evaluates it and
// prints its metrics as key=value on its last line.
func tabularCmd(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("tabular", flag.ContinueOnError)
	train := fs.String("train", "", "training `files`, comma-separated paths or patterns: CSV with a header (.csv) or TFRecord files of tf.Examples (.gz or .gzip: gzipped, .zz or .zlib: zlibbed)")
	eval := fs.String("eval", "", "evaluation `files`, as -train")
	label := fs.String("label", "", "the label's `column`")
	positive := fs.String("positive", "", "a binary label's positive `class` (default: 1, true or yes when one of the two, else the rarer value)")
	head := fs.String("head", "", "the head: binary, multiclass or regression (default: inferred from the label's values)")
	ignore := fs.String("ignore", "", "comma-separated `columns` not to use as features (identifiers, leaks)")
	modelKind := fs.String("model", string(tabular.WideDeep), "the model: linear, dnn or wide_deep")
	steps := fs.Int64("steps", 0, "training `steps` (default: about 20 epochs, 300 to 20000 steps)")
	batch := fs.Int("batch", tabular.DefaultBatchSize, "training batch `size`")
	seed := fs.Uint64("seed", 1, "seed of the variables and the shuffling")
	exportDir := fs.String("export", "", "export the trained model, with its column transformation, under this `directory` (default with -serve: <model_dir>/export)")
	var f runner.Flags
	f.Register(fs)
	pos, err := parseFlags(fs, tabularSynopsis, stdout, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("tabular takes no arguments, got %q", pos)
	}
	if *train == "" || *eval == "" || *label == "" {
		return usagef("tabular needs -train, -eval and -label")
	}
	m, err := tabular.ParseModel(*modelKind)
	if err != nil {
		return usagef("-model: %v", err)
	}
	hk, err := tabular.ParseHeadKind(*head)
	if err != nil {
		return usagef("-head: %v", err)
	}
	if *steps < 0 || *batch <= 0 {
		return usagef("-steps %d, -batch %d: want -steps at least 0 and -batch at least 1", *steps, *batch)
	}
	if err := f.Check(); err != nil {
		return usagef("%v", err)
	}
	if f.Serve != "" && *exportDir == "" {
		*exportDir = filepath.Join(f.ModelDir, "export")
	}
	devices, err := runner.Devices(f.Towers)
	if err != nil {
		return usagef("-towers: %v", err)
	}
	l, err := f.Listen() // before the training: a bad address fails first
	if err != nil {
		return err
	}
	if l != nil {
		defer l.Close()
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := runner.SignalContext(context.Background())
	defer stop()
	run := runner.Config(f.ModelDir, *seed, 100, log)
	res, err := tabular.Run(ctx, tabular.Options{
		Train: list(*train), Eval: list(*eval),
		Infer: tabular.InferOptions{Label: *label, Positive: *positive, Head: hk, Ignore: list(*ignore)},
		Model: m, Steps: *steps, BatchSize: *batch, Seed: *seed,
		Run: run, Replicate: replicate.Config{Devices: devices},
		Export: *exportDir,
	}, stdout)
	if err != nil {
		return err
	}
	defer res.Estimator.Close()
	if res.ExportDir != "" {
		fmt.Fprintf(stderr, "exported to %s\n", res.ExportDir)
	}
	fmt.Fprintln(stdout, res.Summary())
	if l == nil {
		return nil
	}
	srv, err := serving.NewServer([]serving.ModelConfig{{Name: "tabular", BaseDir: *exportDir, Model: res.Estimator.Model()}}, serving.Config{Logger: log})
	if err != nil {
		return err
	}
	defer srv.Close()
	method := "classify"
	if res.Plan.Head.Kind == tabular.Regression {
		method = "regress"
	}
	addr := l.Addr().String()
	log.Info("serving", "export", res.ExportDir, "addr", addr,
		"try", fmt.Sprintf(`curl -d '%s' %s/v1/models/tabular:%s`, exampleRequest(list(*eval), *label), addr, method))
	return srv.Serve(ctx, l)
}

// list splits a comma-separated flag value, dropping empty items.
func list(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// exampleRequest is a classify or regress request body of the first
// record of files, without its label: its raw values as tf.Example JSON.
func exampleRequest(files []string, label string) string {
	_, rows, err := tabular.Sample(files, 1)
	if err != nil || len(rows) == 0 {
		return `{"examples": [{...}]}`
	}
	ex := map[string]any{}
	for name, f := range rows[0] {
		switch {
		case name == label:
		case len(f.Bytes) == 1:
			ex[name] = string(f.Bytes[0])
		case len(f.Int64s) == 1:
			ex[name] = f.Int64s[0]
		case len(f.Floats) == 1:
			ex[name] = f.Floats[0]
		}
	}
	b, err := json.Marshal(map[string]any{"examples": []any{ex}})
	if err != nil {
		return `{"examples": [{...}]}`
	}
	return string(b)
}
