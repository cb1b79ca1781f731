package estimator

import (
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/towerflow/towerflow/model"
)

// Log lines are for a person to read: metrics keep metricDigits
// significant digits (loss=0.012346, not 0.012345678912345), rates are
// whole numbers from 100 up (steps_per_sec=11277, not 11276.687973592701)
// and keep rateDigits significant digits below (0.352). The values stay
// numbers, so a JSON handler still writes numbers.
const (
	metricDigits = 5
	rateDigits   = 3
)

// roundSig rounds x to n significant digits; zero, NaN and infinities
// are returned as they are.
func roundSig(x float64, n int) float64 {
	if x == 0 || !finite(x) {
		return x
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', n, 64), 64)
	if err != nil {
		return x
	}
	return r
}

// roundMetric rounds a loss or metric for a log line.
func roundMetric(x float64) float64 { return roundSig(x, metricDigits) }

// roundRate rounds a speed for a log line.
func roundRate(x float64) float64 {
	if math.Abs(x) >= 100 {
		return math.Round(x)
	}
	return roundSig(x, rateDigits)
}

// rate is a speed as a log line shows it: a whole number (an int64, which
// a handler writes without an exponent: examples_per_sec=1988470, not
// 1.98847e+06) from 100 up, else a float64 of 3 significant digits.
func rate(x float64) any {
	r := roundRate(x)
	if math.Abs(r) >= 100 && math.Abs(r) < 1<<62 {
		return int64(r)
	}
	return r
}

// logEvaluation logs one line for an evaluation: the global step, its name
// if it has one, and every result in name order, rounded.
func (e *Estimator) logEvaluation(name string, results map[string]float64) {
	attrs := []any{slog.Int64("step", e.eng.Step())}
	if name != "" {
		attrs = append(attrs, slog.String("name", name))
	}
	for _, k := range slices.Sorted(maps.Keys(results)) {
		if k != model.GlobalStepName {
			attrs = append(attrs, slog.Float64(k, roundMetric(results[k])))
		}
	}
	e.log.Info("evaluation", attrs...)
}
