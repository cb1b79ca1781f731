package canned_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/export"
	"github.com/towerflow/towerflow/optimizers"
)

// writeRows writes n rows of a census-like CSV file (age, hours, city,
// job, income) whose income depends on all four, and returns its path.
func writeRows(dir, name string, n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 1))
	cities, jobs := []string{"Oslo", "Lima", "Rome", "Pune"}, []string{"nurse", "chef", "pilot", "clerk", "judge"}
	var b strings.Builder
	b.WriteString("age,hours,city,job,income\n")
	for range n {
		age, hours := 18+r.IntN(60), 10+50*r.Float64()
		city, job := cities[r.IntN(len(cities))], jobs[r.IntN(len(jobs))]
		score := float64(age-40)/10 + (hours-35)/10 + r.NormFloat64()
		if job == "pilot" || job == "judge" || city == "Oslo" && job == "chef" {
			score += 2
		}
		income := "<=50K"
		if score > 1 {
			income = ">50K"
		}
		fmt.Fprintf(&b, "%d,%.1f,%s,%s,%s\n", age, hours, city, job, income)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		panic(err)
	}
	return path
}

// A wide-and-deep classifier of raw CSV rows, as tf.estimator's census
// tutorial: feature columns fitted to the training file, trained and
// evaluated from CSV files through the columns' Transformer, exported
// with it, and the export answering raw records (an unknown city among
// them).
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "canned-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	trainFile, evalFile := writeRows(dir, "train.csv", 4000, 1), writeRows(dir, "eval.csv", 1000, 2)
	csv := &dataset.CSVOptions{Schema: dataset.Schema{
		{Name: "age", Kind: dataset.KindInt64}, {Name: "hours", Kind: dataset.KindFloat},
		{Name: "city", Kind: dataset.KindBytes}, {Name: "job", Kind: dataset.KindBytes}, {Name: "income", Kind: dataset.KindBytes},
	}}

	// The columns: numbers standardized and bucketized, a vocabulary
	// taken from the data, a hashed column, a cross, embeddings.
	age, hours := columns.Numeric("age"), columns.Numeric("hours", columns.Standardize())
	ageBuckets := columns.Bucketized(age, []float64{25, 35, 45, 55, 65})
	city := columns.VocabularyFromData("city", columns.OOVBuckets(1))
	job := columns.HashBucket("job", 20)
	cityXJob := columns.Crossed([]columns.Crossable{city, columns.RawKey("job")}, 100)
	wide := []columns.Column{ageBuckets, city, job, cityXJob}
	deep := []columns.Column{hours, ageBuckets, columns.Embedding(city, 3), columns.Embedding(job, 3)}

	// The head names the label's column and its classes; Fit reads the
	// training file once for the vocabulary and the statistics.
	head := canned.BinaryHead{LabelKey: "income", LabelVocabulary: []string{"<=50K", ">50K"}}
	src, err := dataset.NewCSVReader([]string{trainFile}, *csv)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	tr, err := columns.Fit(ctx, src, canned.TransformerConfig(head, append(wide, deep...)...))
	if err != nil {
		fmt.Println(err)
		return
	}
	// TensorFlow's default learning rates of a wide-and-deep model (0.005
	// and 0.001) suit long runs; this short one takes larger ones.
	est, err := canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
		Head: head, Transformer: tr,
		LinearFeatureColumns: wide, LinearOptimizer: optimizers.FTRL(0.1),
		DNNFeatureColumns: deep, DNNHiddenUnits: []int{16, 8}, DNNOptimizer: optimizers.Adagrad(0.05),
	}, estimator.RunConfig{ModelDir: filepath.Join(dir, "model"), Seed: 1, LogEvery: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer est.Close()

	train, err := est.Input(dataset.Pipeline{Files: []string{trainFile}, CSV: csv, BatchSize: 64, Epochs: estimator.Forever, ShuffleBuffer: 1000, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := est.Train(ctx, train, estimator.MaxSteps(1000)); err != nil {
		fmt.Println(err)
		return
	}
	eval, err := est.Input(dataset.Pipeline{Files: []string{evalFile}, CSV: csv, BatchSize: 500})
	if err != nil {
		fmt.Println(err)
		return
	}
	metrics, err := est.Evaluate(ctx, eval)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("auc above 0.9:", metrics[canned.AUCKey] > 0.9)

	// The export records the Transformer: it serves raw values.
	version, err := est.Export(ctx, filepath.Join(dir, "export"), tr.ServingInput(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := export.Load(version, est.Model())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	raw := func(age int64, hours float32, city, job string) dataset.Example {
		return dataset.Example{
			"age": {Int64s: []int64{age}}, "hours": {Floats: []float32{hours}},
			"city": {Bytes: [][]byte{[]byte(city)}}, "job": {Bytes: [][]byte{[]byte(job)}},
		}
	}
	out, err := p.PredictExamples(ctx, canned.PredictSignature, []dataset.Example{
		raw(62, 60, "Oslo", "judge"), raw(19, 12, "Atlantis", "clerk"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	names := est.Head().ClassNames()
	for _, id := range out[canned.ClassIDsKey].Data().([]int64) {
		fmt.Println(names[id])
	}
	// Output:
	// auc above 0.9: true
	// >50K
	// <=50K
}
