package replicate

import (
	"slices"

	"github.com/towerflow/towerflow/model"
)

// Built describes the newest build of towers, for the function OnBuild
// sets (e.g. to compare the variables the model makes with a restored
// checkpoint's): its mode, the variables tower 0's model function asked
// for, in the order it asked, and in Train mode the names of its train
// ops' optimizers (the prefix of their slots, see optimizers.Optimizer).
// ok is false before any build.
func (e *Engine) Built() (mode model.Mode, variables, optimizers []string, ok bool) {
	b := e.built
	if b == nil {
		return 0, nil, nil, false
	}
	for _, p := range b.plans {
		if name := p.opt.Name(); !slices.Contains(optimizers, name) {
			optimizers = append(optimizers, name)
		}
	}
	return b.mode, b.towers[0].VariableNames(), optimizers, true
}
