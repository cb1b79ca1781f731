#include "textflag.h"

#include "avx2_amd64.h"

// Each loop takes n, a positive multiple of 8 (16 for the sums), and keeps
// the Go loops' operations and their order; the sums keep two vector
// accumulators each and store their lanes for the caller to add up.

// func affineAVX2(o, x *float32, n int, m, s, gain, b float32, relu bool)
TEXT ·affineAVX2(SB), NOSPLIT, $0-41
	MOVQ         o+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS m+24(FP), Y1
	VBROADCASTSS s+28(FP), Y2
	VBROADCASTSS gain+32(FP), Y3
	VBROADCASTSS b+36(FP), Y4
	ZEROABS
	XORQ         AX, AX
	CMPB         relu+40(FP), $0
	JNE          affineReLU

affinePlain:
	VMOVUPS (SI)(AX*4), Y0
	VSUBPS  Y1, Y0, Y0
	VMULPS  Y2, Y0, Y0
	VMULPS  Y0, Y3, Y0
	VADDPS  Y4, Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     affinePlain
	VZEROUPPER
	RET

affineReLU:
	VMOVUPS (SI)(AX*4), Y0
	VSUBPS  Y1, Y0, Y0
	VMULPS  Y2, Y0, Y0
	VMULPS  Y0, Y3, Y0
	VADDPS  Y4, Y0, Y0
	RELU(Y0)
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     affineReLU
	VZEROUPPER
	RET

// func sumsAboutAVX2(x *float32, n int, m float32, acc *[16]float32)
TEXT ·sumsAboutAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y1
	MOVQ         acc+24(FP), DI
	VXORPS       Y4, Y4, Y4
	VXORPS       Y5, Y5, Y5
	VXORPS       Y6, Y6, Y6
	VXORPS       Y7, Y7, Y7
	XORQ         AX, AX

sumsLoop:
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y2
	VSUBPS  Y1, Y0, Y0
	VSUBPS  Y1, Y2, Y2
	VADDPS  Y0, Y4, Y4
	VADDPS  Y2, Y5, Y5
	VMULPS  Y0, Y0, Y0
	VMULPS  Y2, Y2, Y2
	VADDPS  Y0, Y6, Y6
	VADDPS  Y2, Y7, Y7
	ADDQ    $16, AX
	CMPQ    AX, CX
	JLT     sumsLoop
	VADDPS  Y5, Y4, Y4
	VADDPS  Y7, Y6, Y6
	VMOVUPS Y4, (DI)
	VMOVUPS Y6, 32(DI)
	VZEROUPPER
	RET

// func sumAndDotAboutAVX2(d, x *float32, n int, m float32, acc *[16]float32)
TEXT ·sumAndDotAboutAVX2(SB), NOSPLIT, $0-40
	MOVQ         d+0(FP), SI
	MOVQ         x+8(FP), DX
	MOVQ         n+16(FP), CX
	VBROADCASTSS m+24(FP), Y1
	MOVQ         acc+32(FP), DI
	VXORPS       Y4, Y4, Y4
	VXORPS       Y5, Y5, Y5
	VXORPS       Y6, Y6, Y6
	VXORPS       Y7, Y7, Y7
	XORQ         AX, AX

dotLoop:
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y2
	VMOVUPS (DX)(AX*4), Y3
	VMOVUPS 32(DX)(AX*4), Y8
	VADDPS  Y0, Y4, Y4
	VADDPS  Y2, Y5, Y5
	VSUBPS  Y1, Y3, Y3
	VSUBPS  Y1, Y8, Y8
	VMULPS  Y3, Y0, Y0
	VMULPS  Y8, Y2, Y2
	VADDPS  Y0, Y6, Y6
	VADDPS  Y2, Y7, Y7
	ADDQ    $16, AX
	CMPQ    AX, CX
	JLT     dotLoop
	VADDPS  Y5, Y4, Y4
	VADDPS  Y7, Y6, Y6
	VMOVUPS Y4, (DI)
	VMOVUPS Y6, 32(DI)
	VZEROUPPER
	RET

// func projectAVX2(d, x *float32, n int, k, ms, m, mx float32)
TEXT ·projectAVX2(SB), NOSPLIT, $0-40
	MOVQ         d+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS k+24(FP), Y1
	VBROADCASTSS ms+28(FP), Y2
	VBROADCASTSS m+32(FP), Y3
	VBROADCASTSS mx+36(FP), Y4
	XORQ         AX, AX

projectLoop:
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS (SI)(AX*4), Y5
	VSUBPS  Y2, Y0, Y0
	VSUBPS  Y3, Y5, Y5
	VMULPS  Y4, Y5, Y5
	VSUBPS  Y5, Y0, Y0
	VMULPS  Y0, Y1, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     projectLoop
	VZEROUPPER
	RET

// func maskAVX2(o, y, grad *float32, n int)
TEXT ·maskAVX2(SB), NOSPLIT, $0-32
	MOVQ  o+0(FP), DI
	MOVQ  y+8(FP), SI
	MOVQ  grad+16(FP), DX
	MOVQ  n+24(FP), CX
	VPXOR Y5, Y5, Y5
	XORQ  AX, AX

maskLoop:
	// y's bits as a signed integer above 0: y > 0, or a NaN with the sign
	// bit clear.
	VMOVDQU  (SI)(AX*4), Y0
	VPCMPGTD Y5, Y0, Y0
	VPAND    (DX)(AX*4), Y0, Y0
	VMOVDQU  Y0, (DI)(AX*4)
	ADDQ     $8, AX
	CMPQ     AX, CX
	JLT      maskLoop
	VZEROUPPER
	RET

// func addAVX2(o, a, b *float32, n int, relu bool)
TEXT ·addAVX2(SB), NOSPLIT, $0-33
	MOVQ   o+0(FP), DI
	MOVQ   a+8(FP), SI
	MOVQ   b+16(FP), DX
	MOVQ   n+24(FP), CX
	ZEROABS
	XORQ   AX, AX
	CMPB   relu+32(FP), $0
	JNE    addReLU

addPlain:
	VMOVUPS (SI)(AX*4), Y0
	VADDPS  (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     addPlain
	VZEROUPPER
	RET

addReLU:
	VMOVUPS (SI)(AX*4), Y0
	VADDPS  (DX)(AX*4), Y0, Y0
	RELU(Y0)
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     addReLU
	VZEROUPPER
	RET

// func reluAVX2(o, x *float32, n int)
TEXT ·reluAVX2(SB), NOSPLIT, $0-24
	MOVQ   o+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   n+16(FP), CX
	ZEROABS
	XORQ   AX, AX

reluLoop:
	VMOVUPS (SI)(AX*4), Y0
	RELU(Y0)
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JLT     reluLoop
	VZEROUPPER
	RET
