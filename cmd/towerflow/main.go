// Command towerflow inspects the model directories towerflow's estimator
// writes, and trains a canned model on any CSV without code.
//
// Usage:
//
//	towerflow inspect [-values] [-n count] <checkpoint, model or export version dir>
//	towerflow plot [-o out.png] [-metrics loss,accuracy] [-width px] [-height px] [-log auto|on|off] <model dir>
//	towerflow tabular -train FILES -eval FILES -label COLUMN [-positive VALUE] [-model linear|dnn|wide_deep] [-steps N] [-model_dir DIR] [-export DIR] [-serve ADDR]
//	towerflow help
//
// inspect prints a checkpoint's path, step and format and a table of its
// variables (name, dtype, shape, trainability, size in elements and bytes)
// with totals; given a model directory it reads the latest whole
// checkpoint, and says on standard error which damaged newer ones it passed
// over. Given an export version directory it prints the export's
// signatures and the variables it holds. With -values it also prints the
// first values of each variable.
//
// plot reads the model directory's train_history.jsonl and
// eval_history.jsonl (JSON Lines: {"step", "loss", "time"} and {"step",
// "time", "metrics"}) and draws the training loss and each evaluation metric
// against the step as a PNG: loss (training and evaluation) in one panel,
// metrics that lie in [0, 1] in another, every other metric in a panel of
// its own, the panels stacked with a shared step axis. The loss axis is
// logarithmic when the losses span more than three decades (-log auto;
// -log on or off decides), and each legend sits in a corner free of data,
// or above it.
//
// tabular infers from a sample of the training files (CSV with a header,
// or TFRecord files of tf.Examples) each column's feature column and the
// head from the label (package tabular), prints them, trains a canned
// linear, DNN or wide & deep model on them with progress on standard
// error, and prints the evaluation's metrics as key=value on its last
// line: "accuracy=… auc=…" (binary), "accuracy=…" (multi-class), "rmse=…
// mae=…" (regression). With -export it exports the model with its
// column transformation, so that serving takes raw values; with -serve it
// also serves it (docs/tabular.md).
//
// The exit status is 0 on success, 1 on an error and 2 on a usage error
// (towerflow without a command is one).
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
