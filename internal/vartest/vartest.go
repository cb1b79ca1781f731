// Package vartest reads an Estimator's variables for tests that compare
// training runs: every variable (optimizer slots and the global step
// included) by name, as float64s.
package vartest

import (
	"testing"

	"github.com/towerflow/towerflow/estimator"
	"github.com/towerflow/towerflow/internal/numeric"
)

// Variables returns every variable of est by name as float64s, failing t
// when one cannot be read.
func Variables(t testing.TB, est *estimator.Estimator) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	for _, name := range est.VariableNames() {
		v, err := est.VariableValue(name)
		if err != nil {
			t.Fatal(err)
		}
		if out[name], err = numeric.Float64s(v); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
