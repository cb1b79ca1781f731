package canned_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/estimator"
)

// BenchmarkWideDeepTrain trains the wide-and-deep classifier of the
// tests (hidden units 64, 32) in batches of 512 on 1 and 2 towers and
// reports rows/s.
func BenchmarkWideDeepTrain(b *testing.B) {
	data := generate(8192, 61, 3, binaryLabel)
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("towers=%d", n), func(b *testing.B) {
			est, err := canned.NewDNNLinearCombinedClassifier(canned.DNNLinearCombinedConfig{
				LinearFeatureColumns: []columns.Column{cat, x1, x2},
				DNNFeatureColumns:    []columns.Column{x1, x2}, DNNHiddenUnits: []int{64, 32},
				Replicate: oneTower(n)}, estimator.RunConfig{LogEvery: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer est.Close()
			ctx := context.Background()
			in := data.input(512, 0, true)
			// The first step builds the towers.
			if err := est.Train(ctx, in, estimator.Steps(1)); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if err := est.Train(ctx, in, estimator.Steps(int64(b.N))); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(512*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
