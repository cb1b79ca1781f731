package towers

import "fmt"

// Precision is the arithmetic of the ops that offer a lower one than their
// dtype's: convolutions and matrix products (replicate.Config.Precision).
type Precision int

const (
	// FullPrecision, the default, computes every op in its dtype.
	FullPrecision Precision = iota
	// BFloat16 is mixed precision: float32 convolutions and matrix
	// products round their inputs to bfloat16 (8 significant bits, to
	// nearest even) and multiply them in bfloat16, summing the products
	// and writing their results in float32. Everything else stays float32:
	// the variables (master weights), gradients, optimizer updates and
	// slots, batch-norm statistics, losses. bfloat16 has float32's
	// exponent range, so no loss scaling is needed.
	BFloat16
)

// String returns the precision's name: "float32" (full precision) or
// "bfloat16".
func (p Precision) String() string {
	switch p {
	case FullPrecision:
		return "float32"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// MixedPrecision is implemented by ops (gorgonia.Op) that can compute in a
// lower precision than their dtype's. SetPrecision asks the op to compute
// in p from its next run on, before its graph is compiled; it returns the
// precision the op will use and, when that is not p, why not (the CPU or
// the build lacks it), in a few words for a log line.
type MixedPrecision interface {
	SetPrecision(p Precision) (got Precision, why string)
}

// ParsePrecision reads a precision's name, as a -precision flag gives it:
// "float32" (or "fp32", or empty) for FullPrecision, "bf16" or "bfloat16"
// for BFloat16.
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "float32", "fp32", "":
		return FullPrecision, nil
	case "bf16", "bfloat16":
		return BFloat16, nil
	}
	return 0, fmt.Errorf("precision %q: want float32 or bf16", s)
}
