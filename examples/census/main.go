// Command census trains TensorFlow's census income (Adult) wide & deep
// tutorial model with one tower per local device:
//
//	go run ./examples/census -data DIR     # DIR holds the UCI adult.data and adult.test
//	go run ./examples/census               # synthetic rows in that format
//
// It reads adult.data and adult.test in their own format (", "
// separators, adult.test's first line "|1x3 Cross validator" and labels
// ending in "."), cleans them as the tutorial does, and trains a
// DNNLinearCombinedClassifier on the tutorial's columns: vocabularies of
// education, marital_status, relationship and workclass, occupation
// hashed into 1000 buckets, age in buckets, the crosses education ×
// occupation and age_buckets × education × occupation in the wide part;
// the numbers, the vocabularies one-hot and occupation embedded in 8 in
// the deep part (100, 75, 50, 25 hidden units). Without -data it writes
// synthetic rows in the same format, with a label that follows a
// logistic model of the columns, and says so. It logs progress and ends
// with the evaluation on adult.test, one line "accuracy=<a> auc=<b>".
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/examples/census/census"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/runner"
)

// options are the command's flags.
type options struct {
	runner.Flags
	data     string
	rows     int
	steps    int64
	batch    int
	linearLR float64
	dnnLR    float64
}

func main() {
	var o options
	o.Register(flag.CommandLine)
	flag.StringVar(&o.data, "data", "", "directory of the UCI files adult.data and adult.test; empty trains on synthetic rows in their format")
	flag.IntVar(&o.rows, "rows", 20000, "synthetic training rows, without -data (evaluation: half as many)")
	flag.Int64Var(&o.steps, "steps", 4000, "training steps to run (more, when -model_dir holds a checkpoint)")
	flag.IntVar(&o.batch, "batch", 40, "batch size (the tutorial's)")
	flag.Float64Var(&o.linearLR, "linear_lr", 0.05, "FTRL learning rate of the wide part")
	flag.Float64Var(&o.dnnLR, "dnn_lr", 0.05, "Adagrad learning rate of the deep part")
	flag.Parse()
	runner.Usage("census", o.check())
	runner.Main("census", o.Flags, func(ctx context.Context) error {
		line, err := run(ctx, o)
		if err == nil {
			fmt.Println(line)
		}
		return err
	}, runner.Serving{})
}

// check checks the flags' ranges.
func (o options) check() error {
	var c runner.Check
	c.Add(o.Flags.Check())
	if o.Serve != "" {
		c.Add(fmt.Errorf("-serve: census does not serve; export with towerflow tabular"))
	}
	c.Int("rows", int64(o.rows), 2, runner.NoLimit)
	c.Int("steps", o.steps, 0, runner.NoLimit)
	c.Int("batch", int64(o.batch), 1, runner.NoLimit)
	c.Float("linear_lr", o.linearLR, 0, math.Inf(1))
	c.Float("dnn_lr", o.dnnLR, 0, math.Inf(1))
	return c.Err()
}

// run trains and evaluates, and returns the last line to print.
func run(ctx context.Context, o options) (string, error) {
	log := runner.Logger()
	raw := o.data
	tmp, err := os.MkdirTemp("", "census")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if raw == "" {
		raw = tmp
		if err := census.WriteSynthetic(raw, o.rows, 1); err != nil {
			return "", err
		}
		log.Info("no -data: training on synthetic rows in adult.data's format (not the census data)", "rows", o.rows, "dir", raw)
	}
	train, test, err := census.Prepare(raw, tmp)
	if err != nil {
		return "", err
	}
	tr, err := columns.NewTransformer(census.Config())
	if err != nil {
		return "", err
	}
	wide, deep := census.Columns()
	devices, err := runner.Devices(o.Towers)
	if err != nil {
		return "", err
	}
	est, err := canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
		Head:                 census.Head(),
		Transformer:          tr,
		LinearFeatureColumns: wide,
		LinearOptimizer:      optimizers.FTRL(o.linearLR),
		DNNFeatureColumns:    deep,
		DNNHiddenUnits:       census.HiddenUnits,
		DNNOptimizer:         optimizers.Adagrad(o.dnnLR),
		Replicate:            replicate.Config{Devices: devices},
	}, runner.Config(o.ModelDir, 1, 200, log))
	if err != nil {
		return "", err
	}
	defer est.Close()
	csv := &dataset.CSVOptions{Schema: census.Schema, NoHeader: true}
	in, err := est.Input(dataset.Pipeline{Files: []string{train}, CSV: csv, BatchSize: o.batch,
		Epochs: estimator.Forever, ShuffleBuffer: 10000, Seed: 1, Workers: 2, Cache: true})
	if err != nil {
		return "", err
	}
	log.Info("training", "towers", len(devices), "steps", o.steps, "batch", o.batch)
	if o.steps > 0 {
		if err := est.Train(ctx, in, estimator.Steps(o.steps)); err != nil {
			return "", err
		}
	}
	eval, err := est.Input(dataset.Pipeline{Files: []string{test}, CSV: csv, BatchSize: 1000, Workers: 2})
	if err != nil {
		return "", err
	}
	m, err := est.Evaluate(ctx, eval)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("accuracy=%.4f auc=%.4f", m[canned.AccuracyKey], m[canned.AUCKey]), nil
}
