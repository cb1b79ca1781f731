// Package bf16 converts between float32 and bfloat16, the 16-bit format
// with float32's sign and 8-bit exponent and 7 stored mantissa bits (8 with
// the implicit one): the upper half of a float32.
//
// FromFloat32 rounds to nearest, ties to even, as PyTorch's
// Tensor.bfloat16() does; a NaN stays a quiet NaN of the same sign, ±Inf
// and ±0 stay themselves, and a float32 within half a unit of the last
// place below bfloat16's largest finite value rounds to it, above to ±Inf.
// Subnormals round like any other value (no flush to zero), where the
// AVX512_BF16 instruction vcvtneps2bf16 and oneDNN's reorders flush them
// to zero; on normal values all of them agree.
package bf16

import "math"

// FromFloat32 returns f rounded to the nearest bfloat16, ties to even, as
// its bits.
func FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep the sign, make it quiet
		return uint16(u>>16) | 0x0040
	}
	// Adding 0x7fff rounds up exactly the values more than halfway to the
	// next bfloat16; the low bit of the kept half breaks ties to even.
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// ToFloat32 returns the float32 with the bfloat16 bits b: exact.
func ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Round returns f rounded to bfloat16, as a float32.
func Round(f float32) float32 { return ToFloat32(FromFloat32(f)) }

// Convert sets dst[i] to src[i] rounded to bfloat16 (FromFloat32), for
// i < len(src); dst must be at least as long as src.
func Convert(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = FromFloat32(f)
	}
}

// ConvertTransposed sets dst, a cols×rows row-major matrix, to the
// transpose of src, a rows×cols one, rounded to bfloat16 (FromFloat32).
func ConvertTransposed(dst []uint16, src []float32, rows, cols int) {
	dst = dst[:rows*cols]
	for i := range rows {
		row := src[i*cols : (i+1)*cols]
		for j, f := range row {
			dst[j*rows+i] = FromFloat32(f)
		}
	}
}
