//go:build !race

// The race detector slows the layers' loops tenfold: this test runs in the
// build without it (CI's OpenBLAS pass, go test ./...).

package cifar_test

import (
	"testing"

	"github.com/towerflow/towerflow/layers"
)

// TestResNetLearns: a short run on the learnable set raises accuracy from
// chance (0.1) well above it, on held-out examples, in the order the build
// computes fastest (NHWC with -tags dnnl).
func TestResNetLearns(t *testing.T) {
	feats, labels := colourData(256, 8, 4)
	testFeats, testLabels := colourData(200, 8, 5)
	est := newEstimator(t, layers.PreferredFormat(), 8, 2, "")
	train(t, est, feats, labels, 32, 1)
	before := evaluate(t, est, testFeats, testLabels, 100)
	train(t, est, feats, labels, 32, 80)
	after := evaluate(t, est, testFeats, testLabels, 100)
	if before["accuracy"] > 0.3 || after["accuracy"] < 0.8 || after["top5"] < after["accuracy"] {
		t.Errorf("accuracy %.3f before, %.3f (top-5 %.3f) after 80 steps: want at most 0.3, then at least 0.8", before["accuracy"], after["accuracy"], after["top5"])
	}
}
