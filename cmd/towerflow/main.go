// Command towerflow inspects the model directories towerflow's estimator
// writes.
//
// Usage:
//
//	towerflow inspect [-values] [-n count] <checkpoint, model or export version dir>
//	towerflow plot [-o out.png] [-metrics loss,accuracy] [-width px] [-height px] [-log auto|on|off] <model dir>
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
// The exit status is 0 on success, 1 on an error and 2 on a usage error
// (towerflow without a command is one).
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
