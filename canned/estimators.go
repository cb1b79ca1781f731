package canned

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"

	G "gorgonia.org/gorgonia"

	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
	"github.com/towerflow/towerflow/optimizers"
	"github.com/towerflow/towerflow/replicate"
	"github.com/towerflow/towerflow/towers"
)

// TensorFlow's default learning rates: linear.py's _LEARNING_RATE (FTRL,
// capped at 1/√(number of columns)), dnn.py's _LEARNING_RATE (Adagrad),
// and dnn_linear_combined.py's _LINEAR_LEARNING_RATE (FTRL, capped alike)
// and _DNN_LEARNING_RATE (Adagrad).
const (
	LinearLearningRate         = 0.2
	DNNLearningRate            = 0.05
	CombinedLinearLearningRate = 0.005
	CombinedDNNLearningRate    = 0.001
)

// Activation is a DNN's hidden-layer activation, named as Keras names it.
type Activation string

// The activations: "" means ReLU, TensorFlow's default.
const (
	ReLU    Activation = "relu"
	Linear  Activation = "linear"
	Tanh    Activation = "tanh"
	Sigmoid Activation = "sigmoid"
)

// LinearConfig configures a linear model (LinearClassifier,
// LinearRegressor): logits = Σ weights of the columns' values and ids +
// bias, columns.LinearLogits (tf.feature_column.linear_model): a
// categorical column's weights are looked up by id, so that their
// gradients, and FTRL's updates, touch only the rows a batch uses.
type LinearConfig struct {
	// Head is the head; nil means BinaryHead{} for a classifier and
	// RegressionHead{} for a regressor.
	Head Head
	// FeatureColumns are the columns the model reads; nil means all of
	// Transformer's. With a Transformer, each is taken as the Transformer
	// fitted it (columns.Transformer.Fitted): the columns defined before
	// columns.Fit may be given.
	FeatureColumns []columns.Column
	// Transformer, when set, is what turns raw records into the model's
	// batches (see Estimator.Transformer).
	Transformer *columns.Transformer
	// Optimizer trains the weights; nil means TensorFlow's default,
	// FTRL with learning rate min(LinearLearningRate, 1/√len(columns)).
	Optimizer optimizers.Optimizer
	// Replicate is the replication (devices, processes, loss reduction,
	// clipping); its Optimizer and OptimizerFn must be nil: the model's
	// optimizers are its own.
	Replicate replicate.Config
}

// DNNConfig configures a deep model (DNNClassifier, DNNRegressor): the
// columns' input layer (columns.InputLayer) through dense hidden layers,
// "dnn/hiddenlayer_<i>", each followed in training by dropout and then,
// with BatchNorm, by batch normalization (momentum 0.999, as TensorFlow),
// and a dense layer of logits, "dnn/logits".
type DNNConfig struct {
	// Head is the head; nil means BinaryHead{} for a classifier and
	// RegressionHead{} for a regressor.
	Head Head
	// HiddenUnits are the hidden layers' widths, at least one layer.
	HiddenUnits []int
	// FeatureColumns are the dense columns the model reads (numeric,
	// bucketized, indicator, embedding); nil means all of Transformer's,
	// which must then be dense too (a categorical column among them is an
	// error: wrap it in columns.Indicator or columns.Embedding).
	// With a Transformer, each is taken as it fitted it, as
	// LinearConfig.FeatureColumns.
	FeatureColumns []columns.Column
	// Transformer, when set, turns raw records into the model's batches.
	Transformer *columns.Transformer
	// Activation is the hidden layers' activation; "" means ReLU.
	Activation Activation
	// Dropout is the rate at which hidden units are dropped in training;
	// 0 drops none.
	Dropout float64
	// BatchNorm normalizes every hidden layer's output.
	BatchNorm bool
	// Optimizer trains the network; nil means Adagrad with learning rate
	// DNNLearningRate, TensorFlow's default.
	Optimizer optimizers.Optimizer
	// Replicate is the replication; its Optimizer and OptimizerFn must be
	// nil.
	Replicate replicate.Config
}

// DNNLinearCombinedConfig configures a wide-and-deep model
// (DNNLinearCombinedClassifier, DNNLinearCombinedRegressor): the logits
// of a linear model over LinearFeatureColumns (the wide part: sparse
// columns and crosses) plus those of a DNN over DNNFeatureColumns (the
// deep part), each part trained by its own optimizer, as TensorFlow's
// DNNLinearCombined estimators: two train ops over disjoint variables.
type DNNLinearCombinedConfig struct {
	// Head is the head; nil means BinaryHead{} for a classifier and
	// RegressionHead{} for a regressor.
	Head Head
	// Transformer, when set, turns raw records into the model's batches;
	// both parts' columns are taken as it fitted them, as
	// LinearConfig.FeatureColumns.
	Transformer *columns.Transformer
	// LinearFeatureColumns are the wide part's columns.
	LinearFeatureColumns []columns.Column
	// LinearOptimizer trains the wide part; nil means FTRL with learning
	// rate min(CombinedLinearLearningRate, 1/√len(LinearFeatureColumns)).
	LinearOptimizer optimizers.Optimizer
	// DNNFeatureColumns are the deep part's dense columns.
	DNNFeatureColumns []columns.Column
	// DNNHiddenUnits, DNNActivation, DNNDropout and BatchNorm are the deep
	// part's, as DNNConfig's.
	DNNHiddenUnits []int
	DNNActivation  Activation
	DNNDropout     float64
	BatchNorm      bool
	// DNNOptimizer trains the deep part; nil means Adagrad with learning
	// rate CombinedDNNLearningRate.
	DNNOptimizer optimizers.Optimizer
	// Replicate is the replication; its Optimizer and OptimizerFn must be
	// nil.
	Replicate replicate.Config
}

// Estimator is a canned estimator: an estimator.Estimator (whose methods
// it has: Train, Evaluate, Predict, Export, ...) running a canned model
// function, with the head that reads its logits and the Transformer, if
// any, that makes its batches from raw records.
type Estimator struct {
	*estimator.Estimator
	model       *replicate.Model
	fn          model.Fn
	head        Head
	transformer *columns.Transformer
}

// Model returns the replicated model the Estimator runs: what
// export.Load takes to load the Estimator's exports.
func (e *Estimator) Model() *replicate.Model { return e.model }

// ModelFn returns the single-device model function of the Estimator,
// which Model replicates.
func (e *Estimator) ModelFn() model.Fn { return e.fn }

// Head returns the Estimator's head.
func (e *Estimator) Head() Head { return e.head }

// Transformer returns the Transformer given in the configuration, nil
// without one.
func (e *Estimator) Transformer() *columns.Transformer { return e.transformer }

// Export is estimator.Estimator's Export, which with a Transformer also
// records it in the export (estimator.Preprocess, before opts), so that
// export.Load's Predictor and package serving take raw records
// (Predictor.PredictExamples) and transform them as training did.
func (e *Estimator) Export(ctx context.Context, baseDir string, inputs estimator.ServingInput, opts ...estimator.ExportOption) (string, error) {
	if e.transformer != nil {
		opts = append([]estimator.ExportOption{estimator.Preprocess(e.transformer)}, opts...)
	}
	return e.Estimator.Export(ctx, baseDir, inputs, opts...)
}

// Input returns the input function of p, a pipeline of files of raw
// records, whose batches the Estimator's Transformer parses
// (dataset.Pipeline.Parser). p's Parser must be unset or the Transformer,
// and its Spec unset; an Estimator without a Transformer is an error.
func (e *Estimator) Input(p dataset.Pipeline) (estimator.InputFn, error) {
	if e.transformer == nil {
		return nil, fmt.Errorf("canned: Input: the estimator has no Transformer to parse records with")
	}
	if p.Parser != nil && p.Parser != dataset.Parser(e.transformer) {
		return nil, fmt.Errorf("canned: Input: the pipeline has a Parser of its own; leave it unset for the estimator's Transformer")
	}
	if p.Spec != nil {
		return nil, fmt.Errorf("canned: Input: the pipeline has a Spec; the estimator's Transformer parses its records")
	}
	p.Parser = e.transformer
	in, err := p.Input()
	if err != nil {
		return nil, fmt.Errorf("canned: Input: %w", err)
	}
	return in, nil
}

// TransformerConfig returns the configuration of a columns.Transformer
// that parses what a model of head over cols reads: the columns, and the
// head's label (its key, its vocabulary as class ids, its dimension) and
// example weights, for columns.NewTransformer or columns.Fit.
func TransformerConfig(head Head, cols ...columns.Column) columns.Config {
	cfg := columns.Config{Columns: cols}
	if head == nil || nilHead(head) {
		return cfg
	}
	l := head.Label()
	cfg.Label = &columns.Label{Key: l.Key, Vocabulary: l.Vocabulary, Dimension: l.Dimension, Int64: l.Classes > 2 || l.Vocabulary != nil}
	if l.WeightColumn != "" {
		cfg.Weight = &columns.ExampleWeight{Key: l.WeightColumn}
	}
	return cfg
}

// checkTransformer checks that a Transformer parses the head's label and
// weights as the head reads them.
func checkTransformer(where string, head Head, tr *columns.Transformer) error {
	if tr == nil {
		return nil
	}
	cfg, l := tr.Config(), head.Label()
	if cfg.Label != nil {
		if cfg.Label.Key != l.Key {
			return fmt.Errorf("%s: the Transformer parses the label %q, the head reads %q", where, cfg.Label.Key, l.Key)
		}
		if !slices.Equal(cfg.Label.Vocabulary, l.Vocabulary) {
			return fmt.Errorf("%s: the Transformer's label vocabulary %q is not the head's %q", where, cfg.Label.Vocabulary, l.Vocabulary)
		}
		if d := max(cfg.Label.Dimension, 1); d != l.Dimension {
			return fmt.Errorf("%s: the Transformer parses %d label values a record, the head reads %d", where, d, l.Dimension)
		}
	}
	if cfg.Weight != nil && cfg.Weight.Key != l.WeightColumn {
		return fmt.Errorf("%s: the Transformer parses example weights %q, the head reads %q", where, cfg.Weight.Key, l.WeightColumn)
	}
	if cfg.Weight == nil && l.WeightColumn != "" {
		if _, ok := tr.Column(l.WeightColumn); !ok {
			return fmt.Errorf("%s: the head reads example weights %q, which the Transformer parses neither as weights nor as a feature (make its configuration with TransformerConfig)", where, l.WeightColumn)
		}
	}
	return nil
}

// nilHead reports whether head is a nil pointer (as a nil *BinaryHead,
// whose value methods would panic).
func nilHead(head Head) bool {
	v := reflect.ValueOf(head)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// task is whether a constructor makes a classifier or a regressor.
type task int

const (
	anyHead task = iota
	classifier
	regressor
)

// NewLinearClassifier returns a linear classifier (TensorFlow's
// LinearClassifier); cfg.Head, when set, must be a BinaryHead or a
// MultiClassHead.
func NewLinearClassifier(cfg LinearConfig, run estimator.RunConfig) (*Estimator, error) {
	return newLinear("NewLinearClassifier", classifier, cfg, run)
}

// NewLinearRegressor returns a linear regressor (TensorFlow's
// LinearRegressor); cfg.Head, when set, must be a RegressionHead.
func NewLinearRegressor(cfg LinearConfig, run estimator.RunConfig) (*Estimator, error) {
	return newLinear("NewLinearRegressor", regressor, cfg, run)
}

// NewLinearEstimator returns a linear model with any head (TensorFlow's
// LinearEstimator); cfg.Head is required.
func NewLinearEstimator(cfg LinearConfig, run estimator.RunConfig) (*Estimator, error) {
	return newLinear("NewLinearEstimator", anyHead, cfg, run)
}

// NewDNNClassifier returns a DNN classifier (TensorFlow's DNNClassifier).
func NewDNNClassifier(cfg DNNConfig, run estimator.RunConfig) (*Estimator, error) {
	return newDNN("NewDNNClassifier", classifier, cfg, run)
}

// NewDNNRegressor returns a DNN regressor (TensorFlow's DNNRegressor).
func NewDNNRegressor(cfg DNNConfig, run estimator.RunConfig) (*Estimator, error) {
	return newDNN("NewDNNRegressor", regressor, cfg, run)
}

// NewDNNEstimator returns a DNN with any head (TensorFlow's DNNEstimator);
// cfg.Head is required.
func NewDNNEstimator(cfg DNNConfig, run estimator.RunConfig) (*Estimator, error) {
	return newDNN("NewDNNEstimator", anyHead, cfg, run)
}

// NewDNNLinearCombinedClassifier returns a wide-and-deep classifier
// (TensorFlow's DNNLinearCombinedClassifier).
func NewDNNLinearCombinedClassifier(cfg DNNLinearCombinedConfig, run estimator.RunConfig) (*Estimator, error) {
	return newCombined("NewDNNLinearCombinedClassifier", classifier, cfg, run)
}

// NewDNNLinearCombinedRegressor returns a wide-and-deep regressor
// (TensorFlow's DNNLinearCombinedRegressor).
func NewDNNLinearCombinedRegressor(cfg DNNLinearCombinedConfig, run estimator.RunConfig) (*Estimator, error) {
	return newCombined("NewDNNLinearCombinedRegressor", regressor, cfg, run)
}

// NewDNNLinearCombinedEstimator returns a wide-and-deep model with any
// head (TensorFlow's DNNLinearCombinedEstimator); cfg.Head is required.
func NewDNNLinearCombinedEstimator(cfg DNNLinearCombinedConfig, run estimator.RunConfig) (*Estimator, error) {
	return newCombined("NewDNNLinearCombinedEstimator", anyHead, cfg, run)
}

func newLinear(where string, t task, cfg LinearConfig, run estimator.RunConfig) (*Estimator, error) {
	where = "canned." + where
	head, err := checkHead(where, t, cfg.Head)
	if err != nil {
		return nil, err
	}
	cols, err := featureColumns(where, "FeatureColumns", cfg.FeatureColumns, cfg.Transformer)
	if err != nil {
		return nil, err
	}
	opt := cfg.Optimizer
	if opt == nil {
		opt = optimizers.FTRL(linearRate(LinearLearningRate, len(cols)))
	}
	w := &wideDeep{head: head, linear: cols, linearOpt: opt}
	return newEstimator(where, w, cfg.Transformer, cfg.Replicate, run)
}

func newDNN(where string, t task, cfg DNNConfig, run estimator.RunConfig) (*Estimator, error) {
	where = "canned." + where
	head, err := checkHead(where, t, cfg.Head)
	if err != nil {
		return nil, err
	}
	cols, err := featureColumns(where, "FeatureColumns", cfg.FeatureColumns, cfg.Transformer)
	if err != nil {
		return nil, err
	}
	d := dnn{hidden: cfg.HiddenUnits, activation: cfg.Activation, dropout: cfg.Dropout, batchNorm: cfg.BatchNorm, cols: cols}
	if err := d.check(where); err != nil {
		return nil, err
	}
	opt := orOptimizer(cfg.Optimizer, optimizers.Adagrad(DNNLearningRate))
	w := &wideDeep{head: head, dnn: &d, dnnOpt: opt}
	return newEstimator(where, w, cfg.Transformer, cfg.Replicate, run)
}

func newCombined(where string, t task, cfg DNNLinearCombinedConfig, run estimator.RunConfig) (*Estimator, error) {
	where = "canned." + where
	head, err := checkHead(where, t, cfg.Head)
	if err != nil {
		return nil, err
	}
	if len(cfg.LinearFeatureColumns) == 0 && len(cfg.DNNFeatureColumns) == 0 {
		return nil, fmt.Errorf("%s: neither LinearFeatureColumns nor DNNFeatureColumns is set: a wide-and-deep model needs at least one part", where)
	}
	w := &wideDeep{head: head}
	if len(cfg.LinearFeatureColumns) > 0 {
		if w.linear, err = featureColumns(where, "LinearFeatureColumns", cfg.LinearFeatureColumns, cfg.Transformer); err != nil {
			return nil, err
		}
		w.linearOpt = orOptimizer(cfg.LinearOptimizer, optimizers.FTRL(linearRate(CombinedLinearLearningRate, len(w.linear))))
	}
	if len(cfg.DNNFeatureColumns) > 0 {
		cols, err := featureColumns(where, "DNNFeatureColumns", cfg.DNNFeatureColumns, cfg.Transformer)
		if err != nil {
			return nil, err
		}
		w.dnn = &dnn{hidden: cfg.DNNHiddenUnits, activation: cfg.DNNActivation, dropout: cfg.DNNDropout, batchNorm: cfg.BatchNorm, cols: cols}
		if err := w.dnn.check(where); err != nil {
			return nil, err
		}
		w.dnnOpt = orOptimizer(cfg.DNNOptimizer, optimizers.Adagrad(CombinedDNNLearningRate))
	}
	if w.linearOpt != nil && w.dnnOpt != nil && w.linearOpt.Name() == w.dnnOpt.Name() {
		return nil, fmt.Errorf("%s: the linear and DNN optimizers are both named %q: their slot variables would clash; name one otherwise (optimizers.Named)", where, w.linearOpt.Name())
	}
	return newEstimator(where, w, cfg.Transformer, cfg.Replicate, run)
}

// orOptimizer returns opt, or def when opt is nil.
func orOptimizer(opt, def optimizers.Optimizer) optimizers.Optimizer {
	if opt != nil {
		return opt
	}
	return def
}

// linearRate is TensorFlow's default learning rate of a linear model of
// n columns: min(rate, 1/√n).
func linearRate(rate float64, n int) float64 {
	return min(rate, 1/math.Sqrt(float64(max(n, 1))))
}

func newEstimator(where string, w *wideDeep, tr *columns.Transformer, rc replicate.Config, run estimator.RunConfig) (*Estimator, error) {
	if err := checkTransformer(where, w.head, tr); err != nil {
		return nil, err
	}
	if rc.Optimizer != nil || rc.OptimizerFn != nil {
		return nil, fmt.Errorf("%s: Replicate has an optimizer: a canned estimator trains with its own (set the configuration's optimizer fields)", where)
	}
	m := replicate.ModelFn(w.modelFn, rc)
	est, err := estimator.New(m, run)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &Estimator{Estimator: est, model: m, fn: w.modelFn, head: w.head, transformer: tr}, nil
}

// checkHead returns head, or the task's default head when it is nil,
// checking that it suits the task and its settings are valid.
func checkHead(where string, t task, head Head) (Head, error) {
	if head != nil && nilHead(head) {
		return nil, fmt.Errorf("%s: Head is a nil %T", where, head)
	}
	if head == nil {
		switch t {
		case classifier:
			head = BinaryHead{}
		case regressor:
			head = RegressionHead{}
		default:
			return nil, fmt.Errorf("%s: no head", where)
		}
	}
	isClassifier := head.ClassNames() != nil
	switch {
	case t == classifier && !isClassifier:
		return nil, fmt.Errorf("%s: head %T is not a classifier's: want a BinaryHead or a MultiClassHead", where, head)
	case t == regressor && isClassifier:
		return nil, fmt.Errorf("%s: head %T is not a regressor's: want a RegressionHead", where, head)
	}
	if c, ok := head.(interface{ Check() error }); ok {
		if err := c.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	if head.LogitsDimension() < 1 {
		return nil, fmt.Errorf("%s: head %T has %d logits per example, want at least 1", where, head, head.LogitsDimension())
	}
	return head, nil
}

// featureColumns returns cols, or the Transformer's columns when cols is
// nil. With a Transformer, each of cols is replaced by the Transformer's
// version of it (Transformer.Fitted), fitted as the batches are made, so
// that the columns defined before columns.Fit (which fits copies) may be
// given; a column the Transformer makes no feature of, or of other
// settings than the Transformer's column of its name, is an error.
func featureColumns(where, field string, cols []columns.Column, tr *columns.Transformer) ([]columns.Column, error) {
	if cols == nil && tr != nil {
		return tr.Columns(), nil
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%s: no %s (and no Transformer to take them from)", where, field)
	}
	out := make([]columns.Column, len(cols))
	for i, c := range cols {
		if v := reflect.ValueOf(c); c == nil || v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, fmt.Errorf("%s: %s[%d] is nil", where, field, i)
		}
		out[i] = c
		if tr == nil {
			continue
		}
		fitted, err := tr.Fitted(c)
		if err != nil {
			return nil, fmt.Errorf("%s: %s[%d] %q: %w", where, field, i, c.Name(), err)
		}
		out[i] = fitted
	}
	return out, nil
}

// dnn is the deep part of a model.
type dnn struct {
	hidden     []int
	activation Activation
	dropout    float64
	batchNorm  bool
	cols       []columns.Column
}

func (d *dnn) check(where string) error {
	if len(d.hidden) == 0 {
		return fmt.Errorf("%s: no hidden units: a DNN needs at least one hidden layer", where)
	}
	for i, u := range d.hidden {
		if u <= 0 {
			return fmt.Errorf("%s: hidden layer %d has %d units, want a positive number", where, i, u)
		}
	}
	if !(d.dropout >= 0 && d.dropout < 1) {
		return fmt.Errorf("%s: dropout rate %v, want a value in [0, 1)", where, d.dropout)
	}
	switch d.activation {
	case "", ReLU, Linear, Tanh, Sigmoid:
	default:
		return fmt.Errorf("%s: unknown activation %q (want %q, %q, %q or %q)", where, d.activation, ReLU, Linear, Tanh, Sigmoid)
	}
	for _, c := range d.cols {
		if _, ok := c.(columns.DenseColumn); !ok {
			return fmt.Errorf("%s: DNN column %q is not dense: wrap a categorical column in columns.Indicator or columns.Embedding", where, c.Name())
		}
	}
	return nil
}

// logits builds the DNN on s and returns its logits, (batch, units), and
// the names of its trainable variables.
func (d *dnn) logits(s *towers.Scope, mode model.Mode, features model.Features, units int) (*G.Node, []string, error) {
	before := len(s.VariableNames())
	x, err := columns.InputLayer(s, features, d.cols...)
	if err != nil {
		return nil, nil, fmt.Errorf("dnn input layer: %w", err)
	}
	training := mode == model.Train
	m := layers.NewModule(s, "dnn")
	var frozen []string // the batch norms' moving statistics
	for i, u := range d.hidden {
		name := fmt.Sprintf("hiddenlayer_%d", i)
		act := layers.ReLU
		if d.activation != "" && d.activation != ReLU {
			act = layers.Linear
		}
		l, err := layers.NewDense(m, name, layers.DenseConfig{In: x.Shape()[1], Units: u, Activation: act, Dtype: x.Dtype()})
		if err != nil {
			return nil, nil, err
		}
		if x, err = l.Apply(x); err != nil {
			return nil, nil, err
		}
		switch d.activation {
		case Tanh:
			x, err = G.Tanh(x)
		case Sigmoid:
			x, err = G.Sigmoid(x)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("dnn/%s: %v: %w", name, d.activation, err)
		}
		if d.dropout > 0 && training {
			if x, err = layers.Dropout(s, m.Name(name+"/dropout"), x, d.dropout, true); err != nil {
				return nil, nil, err
			}
		}
		if d.batchNorm {
			bn := fmt.Sprintf("%s/batchnorm_%d", name, i)
			l, err := layers.NewBatchNorm(m, bn, layers.BatchNormLayerConfig{Channels: u, Dtype: x.Dtype(), BatchNormConfig: layers.BatchNormConfig{Momentum: 0.999}})
			if err != nil {
				return nil, nil, err
			}
			if x, err = l.Apply(x, training); err != nil {
				return nil, nil, err
			}
			frozen = append(frozen, m.Name(bn+"/moving_mean"), m.Name(bn+"/moving_variance"))
		}
	}
	l, err := layers.NewDense(m, "logits", layers.DenseConfig{In: x.Shape()[1], Units: units, Dtype: x.Dtype()})
	if err != nil {
		return nil, nil, err
	}
	if x, err = l.Apply(x); err != nil {
		return nil, nil, err
	}
	vars := slices.DeleteFunc(s.VariableNames()[before:], func(n string) bool { return slices.Contains(frozen, n) })
	return x, vars, nil
}

// wideDeep is every canned model: a linear part, a DNN, or both, whose
// logits add up, read by a head.
type wideDeep struct {
	head      Head
	linear    []columns.Column // nil: no linear part
	linearOpt optimizers.Optimizer
	dnn       *dnn // nil: no DNN
	dnnOpt    optimizers.Optimizer
}

// modelFn is the canned model function.
func (w *wideDeep) modelFn(s *towers.Scope, mode model.Mode, features model.Features, labels model.Labels, _ model.Params) (*model.Spec, error) {
	units := w.head.LogitsDimension()
	var logits *G.Node
	var ops []model.TrainOp
	if w.linear != nil {
		before := len(s.VariableNames())
		l, err := columns.LinearLogits(s, features, units, w.linear...)
		if err != nil {
			return nil, fmt.Errorf("linear logits: %w", err)
		}
		logits = l
		ops = append(ops, model.TrainOp{Optimizer: w.linearOpt, Vars: s.VariableNames()[before:]})
	}
	if w.dnn != nil {
		l, vars, err := w.dnn.logits(s, mode, features, units)
		if err != nil {
			return nil, err
		}
		ops = append(ops, model.TrainOp{Optimizer: w.dnnOpt, Vars: vars})
		if logits == nil {
			logits = l
		} else if logits, err = addLogits(logits, l); err != nil {
			return nil, err
		}
	}
	spec, err := w.head.Spec(mode, logits, features, labels)
	if err != nil {
		return nil, err
	}
	if mode == model.Train {
		spec.TrainOps = ops
	}
	return spec, nil
}

// addLogits returns the sum of the linear and the DNN logits.
func addLogits(linear, deep *G.Node) (*G.Node, error) {
	if !linear.Shape().Eq(deep.Shape()) || linear.Dtype() != deep.Dtype() {
		return nil, fmt.Errorf("linear logits %v %v and DNN logits %v %v differ", linear.Dtype(), linear.Shape(), deep.Dtype(), deep.Shape())
	}
	sum, err := layers.Add(linear, deep, layers.Linear)
	if err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	return sum, nil
}
