package replicate

import (
	"maps"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

// setPrecision asks every float32 op of b's towers that can compute in a
// lower precision (towers.MixedPrecision) to compute in Config.Precision,
// and logs one line naming the reasons ops stay in float32, the first
// time the engine meets each reason.
func (e *Engine) setPrecision(b *build) {
	p := e.cfg.Precision
	if p == towers.FullPrecision {
		return
	}
	why := map[string]bool{}
	for _, t := range b.towers {
		for _, n := range t.Graph().AllNodes() {
			op, ok := n.Op().(towers.MixedPrecision)
			if !ok || n.Dtype() != tensor.Float32 {
				continue
			}
			if got, w := op.SetPrecision(p); got != p && !e.fallbacks[w] {
				why[w] = true
			}
		}
	}
	if len(why) == 0 {
		return
	}
	if e.fallbacks == nil {
		e.fallbacks = map[string]bool{}
	}
	maps.Copy(e.fallbacks, why)
	e.log.Warn("replicate: Config.Precision is "+p.String()+", but some ops run in float32", "why", strings.Join(slices.Sorted(maps.Keys(why)), "; "))
}
