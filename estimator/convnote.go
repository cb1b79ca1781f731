package estimator

import (
	"github.com/towerflow/towerflow/layers"
	"github.com/towerflow/towerflow/model"
)

// SlowConvolutionsNote is the message an Estimator logs, once, when it
// trains a model with float32 convolutions in a build without oneDNN
// (layers.PureGoConvolution): such a model trains several times faster
// built with -tags openblas,dnnl.
const SlowConvolutionsNote = "convolutions run in towerflow's pure-Go code: build with -tags openblas,dnnl (apt-get install libopenblas-dev libdnnl-dev) to train this model much faster (the MNIST CNN: 589 s in the default build, 39 s with -tags openblas,dnnl; docs/performance.md)"

// noteSlowConvolutions logs SlowConvolutionsNote at the Estimator's first
// Train build that has a convolution computed in pure Go; process 0 alone
// logs it.
func (e *Estimator) noteSlowConvolutions() {
	if e.convNoted || e.rank != 0 {
		return
	}
	if mode, _, _, ok := e.eng.Built(); !ok || mode != model.Train || !e.eng.BuiltHasNode(layers.PureGoConvolution) {
		return
	}
	e.convNoted = true
	e.log.Info(SlowConvolutionsNote)
}
