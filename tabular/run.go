package tabular

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
)

// Options are a Run's: the data, the label and what to train.
type Options struct {
	// Train and Eval are the training and evaluation files: CSV files with
	// a header (".csv") or TFRecord files of tf.Examples (gzipped where
	// their names end in ".gz", zlibbed in ".zz"), paths or
	// filepath.Match patterns. Required.
	Train, Eval []string
	// Infer says how to read the label and the features (Label is
	// required).
	Infer InferOptions
	// Model is the model's kind; "" means WideDeep.
	Model Model
	// Steps is the training steps; 0 chooses from the data's size
	// (DefaultSteps).
	Steps int64
	// BatchSize is the training batch; 0 means DefaultBatchSize.
	BatchSize int
	// SampleRows is how many training records Infer sees; 0 means 10000.
	SampleRows int
	// Seed seeds the shuffling of the training records.
	Seed uint64
	// Run is the Estimator's configuration (model directory, logger,
	// progress, seed of the variables).
	Run estimator.RunConfig
	// Replicate is the replication (devices, processes); its optimizers
	// must be nil.
	Replicate replicate.Config
	// Export, when set, is the base directory the trained model is
	// exported to, with its Transformer so that serving takes raw values.
	Export string
}

// DefaultBatchSize is the training batch of a Run without BatchSize.
const DefaultBatchSize = 64

// CacheRows is the most training records a Run keeps in memory, read
// and transformed, after its first epoch (dataset.Pipeline's Cache):
// larger training files are read and transformed again every epoch.
const CacheRows = 1 << 18

// DefaultSteps is the training steps of a Run without Steps for rows
// training records in batches of batch: about 20 epochs, at least 300
// steps and at most 20000.
func DefaultSteps(rows int64, batch int) int64 {
	steps := (20*rows + int64(batch) - 1) / int64(batch)
	return min(max(steps, 300), 20000)
}

// DefaultDropout is the DNN's dropout rate for rows training records:
// 0.5 below 10000 records, where a DNN overfits within a few epochs, else
// 0.1.
func DefaultDropout(rows int64) float64 {
	if rows < 10000 {
		return 0.5
	}
	return 0.1
}

// Result is what a Run did.
type Result struct {
	Plan *Plan
	// Rows is the number of training records; Steps the steps trained.
	Rows  int64
	Steps int64
	// Metrics are the evaluation's: the head's eval metrics (TensorFlow's
	// names; a regressor's also "rmse" and "mae").
	Metrics map[string]float64
	// ExportDir is the export's version directory, "" without Export.
	ExportDir string
	// Estimator is the trained estimator; the caller closes it.
	Estimator *canned.Estimator
}

// Summary is the line `towerflow tabular` ends with: "accuracy=… auc=…"
// for a binary head, "accuracy=…" for a multi-class one, "rmse=… mae=…"
// for a regressor.
func (r *Result) Summary() string {
	var keys []string
	switch r.Plan.Head.Kind {
	case Binary:
		keys = []string{canned.AccuracyKey, canned.AUCKey}
	case MultiClass:
		keys = []string{canned.AccuracyKey}
	default:
		keys = []string{canned.RMSEKey, canned.MAEKey}
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.4f", k, r.Metrics[k])
	}
	return strings.Join(parts, " ")
}

// Run infers a plan from a sample of the training files (printed to out),
// fits its columns to the training files, trains the canned model for the
// plan and evaluates it on the evaluation files. The Estimator it
// returns in the Result is open; on an error it is closed.
func Run(ctx context.Context, o Options, out io.Writer) (_ *Result, err error) {
	if len(o.Train) == 0 || len(o.Eval) == 0 {
		return nil, errors.New("tabular: want training and evaluation files")
	}
	if err := compressedCSV(append(slices.Clone(o.Train), o.Eval...)); err != nil {
		return nil, err
	}
	if IsCSV(o.Train) != IsCSV(o.Eval) {
		return nil, fmt.Errorf("tabular: training files %s and evaluation files %s: one CSV, the other TFRecord", o.Train[0], o.Eval[0])
	}
	if o.Model == "" {
		o.Model = WideDeep
	}
	if _, err := ParseModel(string(o.Model)); err != nil {
		return nil, fmt.Errorf("tabular: %w", err)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.SampleRows == 0 {
		o.SampleRows = 10000
	}
	if o.Steps < 0 || o.BatchSize < 0 || o.SampleRows < 0 {
		return nil, fmt.Errorf("tabular: steps %d, batch %d, sample rows %d: none may be negative", o.Steps, o.BatchSize, o.SampleRows)
	}
	schema, sample, err := Sample(o.Train, o.SampleRows)
	if err != nil {
		return nil, err
	}
	inf := o.Infer
	if schema != nil && inf.Order == nil {
		inf.Order = ColumnNames(schema)
	}
	plan, err := Infer(sample, inf)
	if err != nil {
		return nil, err
	}
	fmt.Fprint(out, plan)
	var csv *dataset.CSVOptions
	if schema != nil {
		csv = &dataset.CSVOptions{Schema: plan.CSVSchema(schema)}
	}
	cols, err := plan.Columns(o.Model)
	if err != nil {
		return nil, err
	}
	src, err := openSource(o.Train, csv)
	if err != nil {
		return nil, err
	}
	counted := &countingSource{src: src}
	tr, err := columns.Fit(ctx, counted, cols.Config)
	if cerr := src.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("tabular: fitting the columns to %s: %w", strings.Join(o.Train, ", "), err)
	}
	res := &Result{Plan: plan, Rows: counted.n, Steps: o.Steps}
	if res.Steps == 0 {
		res.Steps = DefaultSteps(res.Rows, o.BatchSize)
	}
	est, err := newEstimator(plan, o, cols, tr, DefaultDropout(res.Rows))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			est.Close()
		}
	}()
	res.Estimator = est
	train, err := est.Input(dataset.Pipeline{
		Files: o.Train, CSV: csv, Records: records, BatchSize: o.BatchSize, Epochs: estimator.Forever,
		ShuffleBuffer: int(min(res.Rows, 10000)), Seed: o.Seed, Workers: 2,
		Cache: res.Rows <= CacheRows,
	})
	if err != nil {
		return nil, err
	}
	// The evaluation files are checked before the training, not after it.
	evalIn, err := est.Input(dataset.Pipeline{Files: o.Eval, CSV: csv, Records: records, BatchSize: 1024, Workers: 2})
	if err != nil {
		return nil, err
	}
	if err := checkFirstRecord(o.Eval, csv, tr); err != nil {
		return nil, fmt.Errorf("tabular: evaluation files %s: %w", strings.Join(o.Eval, ", "), err)
	}
	if o.Run.Logger != nil {
		o.Run.Logger.Info("training", "model", o.Model, "rows", res.Rows, "steps", res.Steps, "batch", o.BatchSize, "cached", res.Rows <= CacheRows)
	}
	if err := est.Train(ctx, train, estimator.Steps(res.Steps)); err != nil {
		return nil, err
	}
	if res.Metrics, err = est.Evaluate(ctx, evalIn); err != nil {
		return nil, err
	}
	if o.Export != "" {
		if res.ExportDir, err = exportModel(ctx, est, tr, o.Export); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// newEstimator makes the canned estimator of the plan for o.Model, with
// the defaults of a first run: TensorFlow's FTRL for the linear part at
// a learning rate for few steps, Adam for the DNN, which drops out
// dropout of its units in training.
func newEstimator(plan *Plan, o Options, cols Columns, tr *columns.Transformer, dropout float64) (*canned.Estimator, error) {
	pick := func(names []string) ([]columns.Column, error) {
		var out []columns.Column
		for _, n := range names {
			c, ok := tr.Column(n)
			if !ok {
				return nil, fmt.Errorf("tabular: column %q is not among the fitted columns", n)
			}
			out = append(out, c)
		}
		return out, nil
	}
	wide, err := pick(cols.WideNames)
	if err != nil {
		return nil, err
	}
	deep, err := pick(cols.DeepNames)
	if err != nil {
		return nil, err
	}
	head := plan.CannedHead()
	hidden := HiddenUnits(plan)
	linearOpt := optimizers.FTRL(LinearLearningRate, optimizers.Named("Ftrl"))
	dnnOpt := optimizers.Adam(DNNLearningRate, optimizers.Named("Adam"))
	switch o.Model {
	case Linear:
		return canned.NewLinearEstimator(canned.LinearConfig{Head: head, FeatureColumns: wide, Transformer: tr,
			Optimizer: linearOpt, Replicate: o.Replicate}, o.Run)
	case DNN:
		return canned.NewDNNEstimator(canned.DNNConfig{Head: head, HiddenUnits: hidden, FeatureColumns: deep, Transformer: tr, Dropout: dropout,
			Optimizer: dnnOpt, Replicate: o.Replicate}, o.Run)
	}
	return canned.NewDNNLinearCombinedEstimator(canned.DNNLinearCombinedConfig{Head: head, Transformer: tr,
		LinearFeatureColumns: wide, LinearOptimizer: linearOpt,
		DNNFeatureColumns: deep, DNNHiddenUnits: hidden, DNNOptimizer: dnnOpt, DNNDropout: dropout,
		Replicate: o.Replicate}, o.Run)
}

// The learning rates of a Run's optimizers: FTRL for the linear part,
// Adam for the DNN.
const (
	LinearLearningRate = 0.1
	DNNLearningRate    = 0.001
)

// HiddenUnits are the DNN's layers for a plan: 128 and 64 units.
func HiddenUnits(*Plan) []int { return []int{128, 64} }

// source is a Source that holds files open.
type source interface {
	dataset.Source
	Close() error
}

// records is how tabular reads TFRecord files: compressed as their
// names say (".gz" gzip, ".zz" zlib).
var records = dataset.RecordOptions{Compression: dataset.AutoCompression}

// openSource reads files: CSV with csv, TFRecord without.
func openSource(files []string, csv *dataset.CSVOptions) (source, error) {
	if csv != nil {
		r, err := dataset.NewCSVReader(files, *csv)
		if err != nil {
			return nil, fmt.Errorf("tabular: %w", err)
		}
		return r, nil
	}
	r, err := dataset.NewExampleReader(files, records)
	if err != nil {
		return nil, fmt.Errorf("tabular: %w", err)
	}
	return r, nil
}

// checkFirstRecord reads the first record of files and parses it with
// tr: a header or a record that does not fit the training files' columns
// is an error before the training. Files without records are one too.
func checkFirstRecord(files []string, csv *dataset.CSVOptions, tr *columns.Transformer) error {
	src, err := openSource(files, csv)
	if err != nil {
		return err
	}
	defer src.Close()
	ex, err := src.Next()
	if err == io.EOF {
		return errors.New("no records")
	}
	if err != nil {
		return err
	}
	_, err = tr.Parse([]dataset.Example{ex})
	return err
}

// countingSource counts the records it passes on.
type countingSource struct {
	src dataset.Source
	n   int64
}

func (c *countingSource) Next() (dataset.Example, error) {
	ex, err := c.src.Next()
	if err == nil {
		c.n++
	}
	return ex, err
}

// exportModel writes est's latest checkpoint under base with its Transformer
// (canned.Estimator.Export), so that serving takes raw feature values,
// one a column.
func exportModel(ctx context.Context, est *canned.Estimator, tr *columns.Transformer, base string) (string, error) {
	return est.Export(ctx, base, tr.ServingInput(1))
}
