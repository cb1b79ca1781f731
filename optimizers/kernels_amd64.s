#include "textflag.h"

// The loops of update (kernels.go) for float32, eight elements at a time,
// with the Go loops' operations in their order. n is a positive multiple
// of 8; p points to an avx2Coeffs, whose vectors are read in place.

#define LR 0
#define DECAY 32
#define MOM 64
#define B1 96
#define OMB1 128
#define B2 160
#define OMB2 192
#define CORR1 224
#define CORR2 256
#define EPS 288
#define FLOOR 320

// CONSTS sets Y15 to zeros, Y14 to the exponent field's mask and Y13 to
// the mask of all but the sign bit.
#define CONSTS \
	VXORPS   Y15, Y15, Y15; \
	VPCMPEQD Y13, Y13, Y13; \
	VPSRLD   $1, Y13, Y13; \
	VPCMPEQD Y14, Y14, Y14; \
	VPSRLD   $24, Y14, Y14; \
	VPSLLD   $23, Y14, Y14

// FTZ flushes the subnormal lanes of x to zeros of their sign, as ftz: t
// is all ones but the sign bit where x's exponent field is zero, and x
// keeps the bits that t does not have. t is scratch.
#define FTZ(x, t) \
	VANDPS   Y14, x, t; \
	VPCMPEQD Y15, t, t; \
	VANDPS   Y13, t, t; \
	VANDNPS  x, t, x

// SQUARED sets out to g, or to zero where s0 == 0 and |g| < floor, as
// update's gs; t is scratch.
#define SQUARED(g, s0, out, t) \
	VANDPS  Y13, g, t; \
	VCMPPS  $0x11, FLOOR(R8), t, t; \
	VCMPPS  $0x00, Y15, s0, out; \
	VANDPS  out, t, t; \
	VANDNPS g, t, out

// STEPW sets w = w·decay − u at (DI)(AX*4); Y6 is scratch.
#define STEPW(u) \
	VMOVUPS (DI)(AX*4), Y6; \
	VMULPS  DECAY(R8), Y6, Y6; \
	VSUBPS  u, Y6, Y6; \
	VMOVUPS Y6, (DI)(AX*4)

// SECOND sets Y3 = ftz(b2·ftz(s) + omb2·gs·gs) from a second-moment slot s
// in Y3 and g in Y0, as Adam's and RMSProp's loops; Y2, Y4, Y5 are scratch.
#define SECOND \
	FTZ(Y3, Y2); \
	SQUARED(Y0, Y3, Y4, Y2); \
	VMULPS OMB2(R8), Y4, Y5; \
	VMULPS Y4, Y5, Y5; \
	VMULPS B2(R8), Y3, Y3; \
	VADDPS Y5, Y3, Y3; \
	FTZ(Y3, Y2)

// ADAPT sets w = w·decay − u/(√v + eps) for v in Y3.
#define ADAPT(u) \
	VSQRTPS Y3, Y3; \
	VADDPS  EPS(R8), Y3, Y3; \
	VDIVPS  Y3, u, u; \
	STEPW(u)

#define NEXT(label) \
	ADDQ $8, AX; \
	CMPQ AX, CX; \
	JLT  label

// func sgdAVX2(w, grad *float32, n int, p *avx2Coeffs)
TEXT ·sgdAVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ p+24(FP), R8
	XORQ AX, AX

sgdLoop:
	VMOVUPS (SI)(AX*4), Y0
	VMULPS  LR(R8), Y0, Y0
	STEPW(Y0)
	NEXT(sgdLoop)
	VZEROUPPER
	RET

// func momentumAVX2(w, grad, acc *float32, n int, p *avx2Coeffs, nesterov bool)
TEXT ·momentumAVX2(SB), NOSPLIT, $0-41
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ acc+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ p+32(FP), R8
	CONSTS
	XORQ AX, AX
	CMPB nesterov+40(FP), $0
	JNE  nesterovLoop

momentumLoop:
	// a = ftz(mom·ftz(acc) + g); w = w·decay − lr·a
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS (DX)(AX*4), Y1
	FTZ(Y1, Y2)
	VMULPS  MOM(R8), Y1, Y1
	VADDPS  Y0, Y1, Y1
	FTZ(Y1, Y2)
	VMOVUPS Y1, (DX)(AX*4)
	VMULPS  LR(R8), Y1, Y1
	STEPW(Y1)
	NEXT(momentumLoop)
	VZEROUPPER
	RET

nesterovLoop:
	// the same a; w = w·decay − lr·(g + mom·a)
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS (DX)(AX*4), Y1
	FTZ(Y1, Y2)
	VMULPS  MOM(R8), Y1, Y1
	VADDPS  Y0, Y1, Y1
	FTZ(Y1, Y2)
	VMOVUPS Y1, (DX)(AX*4)
	VMULPS  MOM(R8), Y1, Y1
	VADDPS  Y1, Y0, Y1
	VMULPS  LR(R8), Y1, Y1
	STEPW(Y1)
	NEXT(nesterovLoop)
	VZEROUPPER
	RET

// func adamAVX2(w, grad, m, v *float32, n int, p *avx2Coeffs)
TEXT ·adamAVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ p+40(FP), R8
	CONSTS
	XORQ AX, AX

adamLoop:
	// mi = ftz(b1·ftz(m) + omb1·g)
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS (DX)(AX*4), Y1
	FTZ(Y1, Y2)
	VMULPS  B1(R8), Y1, Y1
	VMULPS  OMB1(R8), Y0, Y2
	VADDPS  Y2, Y1, Y1
	FTZ(Y1, Y2)
	VMOVUPS Y1, (DX)(AX*4)

	// vi = ftz(b2·v0 + omb2·gs·gs), v0 = ftz(v)
	VMOVUPS (R9)(AX*4), Y3
	SECOND
	VMOVUPS Y3, (R9)(AX*4)

	// w = w·decay − lr·(mi/corr1)/(√(vi/corr2) + eps)
	VDIVPS CORR1(R8), Y1, Y1
	VDIVPS CORR2(R8), Y3, Y3
	VMULPS LR(R8), Y1, Y1
	ADAPT(Y1)
	NEXT(adamLoop)
	VZEROUPPER
	RET

// func rmspropAVX2(w, grad, ms *float32, n int, p *avx2Coeffs)
TEXT ·rmspropAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ ms+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ p+32(FP), R8
	CONSTS
	XORQ AX, AX

rmspropLoop:
	// a = ftz(ρ·m0 + (1−ρ)·gs·gs), m0 = ftz(ms); w = w·decay − lr·g/(√a + eps)
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS (DX)(AX*4), Y3
	SECOND
	VMOVUPS Y3, (DX)(AX*4)
	VMULPS  LR(R8), Y0, Y1
	ADAPT(Y1)
	NEXT(rmspropLoop)
	VZEROUPPER
	RET

// func adagradAVX2(w, grad, acc *float32, n int, p *avx2Coeffs)
TEXT ·adagradAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ acc+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ p+32(FP), R8
	CONSTS
	XORQ AX, AX

adagradLoop:
	// a = ftz(acc + gs·gs); w = w·decay − lr·g/(√a + eps)
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS (DX)(AX*4), Y3
	SQUARED(Y0, Y3, Y4, Y2)
	VMULPS  Y4, Y4, Y5
	VADDPS  Y5, Y3, Y3
	FTZ(Y3, Y2)
	VMOVUPS Y3, (DX)(AX*4)
	VMULPS  LR(R8), Y0, Y1
	ADAPT(Y1)
	NEXT(adagradLoop)
	VZEROUPPER
	RET
