#include "textflag.h"

#include "avx2_amd64.h"

// The loops over channels-last rows: eight channels to a vector, rows
// stride bytes apart. The sums keep one accumulator per channel, loaded
// from and stored back to the caller's sums, and add the rows in order,
// as the Go loops do; the elementwise loops keep the Go loops' operations
// and their order.

// PARAMS16 loads the four parameter vectors of 16 channels at R8, R9,
// R10 and R11 into Y1–Y4 (channels 0–7) and Y7–Y10 (channels 8–15).
#define PARAMS16 \
	VMOVUPS (R8), Y1; \
	VMOVUPS (R9), Y2; \
	VMOVUPS (R10), Y3; \
	VMOVUPS (R11), Y4; \
	VMOVUPS 32(R8), Y7; \
	VMOVUPS 32(R9), Y8; \
	VMOVUPS 32(R10), Y9; \
	VMOVUPS 32(R11), Y10

// SUMS_ROW adds one row's x − m to s and (x − m)² to ss for the eight
// channels at off(SI).
#define SUMS_ROW(off, t, m, s, ss) \
	VMOVUPS off(SI), t; \
	VSUBPS  m, t, t; \
	VADDPS  t, s, s; \
	VMULPS  t, t, t; \
	VADDPS  t, ss, ss

// func sumsRowsAVX2(x *float32, rows, stride int, m *float32, nv int, s, ss *float32)
TEXT ·sumsRowsAVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ rows+8(FP), CX
	MOVQ stride+16(FP), DX
	SHLQ $2, DX
	MOVQ m+24(FP), R8
	MOVQ nv+32(FP), R9
	MOVQ s+40(FP), DI
	MOVQ ss+48(FP), R10
	CMPQ R9, $2
	JLT  sums1
	JEQ  sums2
	CMPQ R9, $3
	JEQ  sums3

	VMOVUPS (R8), Y4
	VMOVUPS 32(R8), Y5
	VMOVUPS 64(R8), Y6
	VMOVUPS 96(R8), Y7
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	VMOVUPS 64(DI), Y10
	VMOVUPS 96(DI), Y11
	VMOVUPS (R10), Y12
	VMOVUPS 32(R10), Y13
	VMOVUPS 64(R10), Y14
	VMOVUPS 96(R10), Y15

sums4Loop:
	SUMS_ROW(0, Y0, Y4, Y8, Y12)
	SUMS_ROW(32, Y1, Y5, Y9, Y13)
	SUMS_ROW(64, Y2, Y6, Y10, Y14)
	SUMS_ROW(96, Y3, Y7, Y11, Y15)
	ADDQ DX, SI
	DECQ CX
	JNZ  sums4Loop
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	VMOVUPS Y10, 64(DI)
	VMOVUPS Y11, 96(DI)
	VMOVUPS Y12, (R10)
	VMOVUPS Y13, 32(R10)
	VMOVUPS Y14, 64(R10)
	VMOVUPS Y15, 96(R10)
	VZEROUPPER
	RET

sums3:
	VMOVUPS (R8), Y4
	VMOVUPS 32(R8), Y5
	VMOVUPS 64(R8), Y6
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	VMOVUPS 64(DI), Y10
	VMOVUPS (R10), Y12
	VMOVUPS 32(R10), Y13
	VMOVUPS 64(R10), Y14

sums3Loop:
	SUMS_ROW(0, Y0, Y4, Y8, Y12)
	SUMS_ROW(32, Y1, Y5, Y9, Y13)
	SUMS_ROW(64, Y2, Y6, Y10, Y14)
	ADDQ DX, SI
	DECQ CX
	JNZ  sums3Loop
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	VMOVUPS Y10, 64(DI)
	VMOVUPS Y12, (R10)
	VMOVUPS Y13, 32(R10)
	VMOVUPS Y14, 64(R10)
	VZEROUPPER
	RET

sums2:
	VMOVUPS (R8), Y4
	VMOVUPS 32(R8), Y5
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	VMOVUPS (R10), Y12
	VMOVUPS 32(R10), Y13

sums2Loop:
	SUMS_ROW(0, Y0, Y4, Y8, Y12)
	SUMS_ROW(32, Y1, Y5, Y9, Y13)
	ADDQ DX, SI
	DECQ CX
	JNZ  sums2Loop
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	VMOVUPS Y12, (R10)
	VMOVUPS Y13, 32(R10)
	VZEROUPPER
	RET

sums1:
	VMOVUPS (R8), Y4
	VMOVUPS (DI), Y8
	VMOVUPS (R10), Y12

sums1Loop:
	SUMS_ROW(0, Y0, Y4, Y8, Y12)
	ADDQ DX, SI
	DECQ CX
	JNZ  sums1Loop
	VMOVUPS Y8, (DI)
	VMOVUPS Y12, (R10)
	VZEROUPPER
	RET

// DOT_ROW adds one row's d to s and d·(x − m) to sx for the eight
// channels at off(SI) (d) and off(BX) (x).
#define DOT_ROW(off, t, u, m, s, sx) \
	VMOVUPS off(SI), t; \
	VMOVUPS off(BX), u; \
	VADDPS  t, s, s; \
	VSUBPS  m, u, u; \
	VMULPS  u, t, t; \
	VADDPS  t, sx, sx

// func sumAndDotRowsAVX2(d, x *float32, rows, stride int, m *float32, nv int, s, sx *float32)
TEXT ·sumAndDotRowsAVX2(SB), NOSPLIT, $0-64
	MOVQ d+0(FP), SI
	MOVQ x+8(FP), BX
	MOVQ rows+16(FP), CX
	MOVQ stride+24(FP), DX
	SHLQ $2, DX
	MOVQ m+32(FP), R8
	MOVQ nv+40(FP), R9
	MOVQ s+48(FP), DI
	MOVQ sx+56(FP), R10
	CMPQ R9, $2
	JLT  dot1
	JEQ  dot2
	CMPQ R9, $3
	JEQ  dot3

	VMOVUPS (R8), Y4
	VMOVUPS 32(R8), Y5
	VMOVUPS 64(R8), Y6
	VMOVUPS 96(R8), Y7
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	VMOVUPS 64(DI), Y10
	VMOVUPS 96(DI), Y11
	VMOVUPS (R10), Y12
	VMOVUPS 32(R10), Y13
	VMOVUPS 64(R10), Y14
	VMOVUPS 96(R10), Y15

dot4Loop:
	DOT_ROW(0, Y0, Y1, Y4, Y8, Y12)
	DOT_ROW(32, Y2, Y3, Y5, Y9, Y13)
	DOT_ROW(64, Y0, Y1, Y6, Y10, Y14)
	DOT_ROW(96, Y2, Y3, Y7, Y11, Y15)
	ADDQ DX, SI
	ADDQ DX, BX
	DECQ CX
	JNZ  dot4Loop
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	VMOVUPS Y10, 64(DI)
	VMOVUPS Y11, 96(DI)
	VMOVUPS Y12, (R10)
	VMOVUPS Y13, 32(R10)
	VMOVUPS Y14, 64(R10)
	VMOVUPS Y15, 96(R10)
	VZEROUPPER
	RET

dot3:
	VMOVUPS (R8), Y4
	VMOVUPS 32(R8), Y5
	VMOVUPS 64(R8), Y6
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	VMOVUPS 64(DI), Y10
	VMOVUPS (R10), Y12
	VMOVUPS 32(R10), Y13
	VMOVUPS 64(R10), Y14

dot3Loop:
	DOT_ROW(0, Y0, Y1, Y4, Y8, Y12)
	DOT_ROW(32, Y2, Y3, Y5, Y9, Y13)
	DOT_ROW(64, Y0, Y1, Y6, Y10, Y14)
	ADDQ DX, SI
	ADDQ DX, BX
	DECQ CX
	JNZ  dot3Loop
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	VMOVUPS Y10, 64(DI)
	VMOVUPS Y12, (R10)
	VMOVUPS Y13, 32(R10)
	VMOVUPS Y14, 64(R10)
	VZEROUPPER
	RET

dot2:
	VMOVUPS (R8), Y4
	VMOVUPS 32(R8), Y5
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	VMOVUPS (R10), Y12
	VMOVUPS 32(R10), Y13

dot2Loop:
	DOT_ROW(0, Y0, Y1, Y4, Y8, Y12)
	DOT_ROW(32, Y2, Y3, Y5, Y9, Y13)
	ADDQ DX, SI
	ADDQ DX, BX
	DECQ CX
	JNZ  dot2Loop
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	VMOVUPS Y12, (R10)
	VMOVUPS Y13, 32(R10)
	VZEROUPPER
	RET

dot1:
	VMOVUPS (R8), Y4
	VMOVUPS (DI), Y8
	VMOVUPS (R10), Y12

dot1Loop:
	DOT_ROW(0, Y0, Y1, Y4, Y8, Y12)
	ADDQ DX, SI
	ADDQ DX, BX
	DECQ CX
	JNZ  dot1Loop
	VMOVUPS Y8, (DI)
	VMOVUPS Y12, (R10)
	VZEROUPPER
	RET

// The elementwise loops run along the rows, eight channels at a time,
// taking the channels' parameters from memory (the first cache) beside
// each vector; AX is the offset of the channels in the row and in the
// parameters. Rows of 16 channels (the first stage of a ResNet, its
// largest tensors) keep their parameters in registers instead, and
// Project's rows of 32 most of them.

// AFFINE_VEC computes eight channels of o's row at SI, DI and AX.
#define AFFINE_VEC \
	VMOVUPS (SI)(AX*1), Y0; \
	VMOVUPS (R10)(AX*1), Y3; \
	VSUBPS  (R8)(AX*1), Y0, Y0; \
	VMULPS  (R9)(AX*1), Y0, Y0; \
	VMULPS  Y0, Y3, Y0; \
	VADDPS  (R11)(AX*1), Y0, Y0

// func affineRowsAVX2(o, x *float32, rows, stride, c8 int, m, s, gain, b *float32, relu bool)
TEXT ·affineRowsAVX2(SB), NOSPLIT, $0-73
	MOVQ o+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ rows+16(FP), CX
	MOVQ stride+24(FP), BX
	SHLQ $2, BX
	MOVQ c8+32(FP), DX
	SHLQ $2, DX
	MOVQ m+40(FP), R8
	MOVQ s+48(FP), R9
	MOVQ gain+56(FP), R10
	MOVQ b+64(FP), R11
	ZEROABS
	CMPQ DX, $64
	JEQ  affine16
	CMPB relu+72(FP), $0
	JNE  affineRowsReLU

affineRowsPlain:
	XORQ AX, AX

affineRowsPlainLoop:
	AFFINE_VEC
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, DX
	JLT     affineRowsPlainLoop
	ADDQ    BX, SI
	ADDQ    BX, DI
	DECQ    CX
	JNZ     affineRowsPlain
	VZEROUPPER
	RET

affineRowsReLU:
	XORQ AX, AX

affineRowsReLULoop:
	AFFINE_VEC
	RELU(Y0)
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, DX
	JLT     affineRowsReLULoop
	ADDQ    BX, SI
	ADDQ    BX, DI
	DECQ    CX
	JNZ     affineRowsReLU
	VZEROUPPER
	RET

// AFFINE16 is AFFINE_VEC on t with parameters in registers.
#define AFFINE16(t, m, s, g, b) \
	VSUBPS m, t, t; \
	VMULPS s, t, t; \
	VMULPS t, g, t; \
	VADDPS b, t, t

affine16:
	PARAMS16
	CMPB    relu+72(FP), $0
	JNE     affine16ReLU

affine16Plain:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y11
	AFFINE16(Y0, Y1, Y2, Y3, Y4)
	AFFINE16(Y11, Y7, Y8, Y9, Y10)
	VMOVUPS Y0, (DI)
	VMOVUPS Y11, 32(DI)
	ADDQ    BX, SI
	ADDQ    BX, DI
	DECQ    CX
	JNZ     affine16Plain
	VZEROUPPER
	RET

affine16ReLU:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y11
	AFFINE16(Y0, Y1, Y2, Y3, Y4)
	AFFINE16(Y11, Y7, Y8, Y9, Y10)
	RELU(Y0)
	RELU(Y11)
	VMOVUPS Y0, (DI)
	VMOVUPS Y11, 32(DI)
	ADDQ    BX, SI
	ADDQ    BX, DI
	DECQ    CX
	JNZ     affine16ReLU
	VZEROUPPER
	RET

// func projectRowsAVX2(d, src, x *float32, rows, stride, c8 int, k, ms, m, mx *float32)
TEXT ·projectRowsAVX2(SB), NOSPLIT, $0-80
	MOVQ d+0(FP), DI
	MOVQ src+8(FP), R12
	MOVQ x+16(FP), SI
	MOVQ rows+24(FP), CX
	MOVQ stride+32(FP), BX
	SHLQ $2, BX
	MOVQ c8+40(FP), DX
	SHLQ $2, DX
	MOVQ k+48(FP), R8
	MOVQ ms+56(FP), R9
	MOVQ m+64(FP), R10
	MOVQ mx+72(FP), R11
	CMPQ DX, $64
	JEQ  project16
	CMPQ DX, $128
	JEQ  project32

projectRows:
	XORQ AX, AX

projectRowsLoop:
	VMOVUPS (R12)(AX*1), Y0
	VMOVUPS (SI)(AX*1), Y5
	VMOVUPS (R8)(AX*1), Y1
	VSUBPS  (R9)(AX*1), Y0, Y0
	VSUBPS  (R10)(AX*1), Y5, Y5
	VMULPS  (R11)(AX*1), Y5, Y5
	VSUBPS  Y5, Y0, Y0
	VMULPS  Y0, Y1, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, DX
	JLT     projectRowsLoop
	ADDQ    BX, SI
	ADDQ    BX, DI
	ADDQ    BX, R12
	DECQ    CX
	JNZ     projectRows
	VZEROUPPER
	RET

// PROJECT32 is projectRowsLoop on the eight channels at off with k, ms
// and m in registers, mx from memory.
#define PROJECT32(off, k, ms, m) \
	VMOVUPS off(R12), Y0; \
	VMOVUPS off(SI), Y13; \
	VSUBPS  ms, Y0, Y0; \
	VSUBPS  m, Y13, Y13; \
	VMULPS  off(R11), Y13, Y13; \
	VSUBPS  Y13, Y0, Y0; \
	VMULPS  Y0, k, Y0; \
	VMOVUPS Y0, off(DI)

// Rows of 32 channels (a ResNet's second stage) keep three of the four
// parameters in registers.
project32:
	VMOVUPS (R8), Y1
	VMOVUPS (R9), Y2
	VMOVUPS (R10), Y3
	VMOVUPS 32(R8), Y4
	VMOVUPS 32(R9), Y5
	VMOVUPS 32(R10), Y6
	VMOVUPS 64(R8), Y7
	VMOVUPS 64(R9), Y8
	VMOVUPS 64(R10), Y9
	VMOVUPS 96(R8), Y10
	VMOVUPS 96(R9), Y11
	VMOVUPS 96(R10), Y12

project32Loop:
	PROJECT32(0, Y1, Y2, Y3)
	PROJECT32(32, Y4, Y5, Y6)
	PROJECT32(64, Y7, Y8, Y9)
	PROJECT32(96, Y10, Y11, Y12)
	ADDQ BX, SI
	ADDQ BX, DI
	ADDQ BX, R12
	DECQ CX
	JNZ  project32Loop
	VZEROUPPER
	RET

// PROJECT16 is projectRowsLoop's arithmetic on d and x with parameters in
// registers.
#define PROJECT16(d, x, k, ms, m, mx) \
	VSUBPS ms, d, d; \
	VSUBPS m, x, x; \
	VMULPS mx, x, x; \
	VSUBPS x, d, d; \
	VMULPS d, k, d

project16:
	PARAMS16

project16Loop:
	VMOVUPS (R12), Y0
	VMOVUPS (SI), Y5
	VMOVUPS 32(R12), Y11
	VMOVUPS 32(SI), Y12
	PROJECT16(Y0, Y5, Y1, Y2, Y3, Y4)
	PROJECT16(Y11, Y12, Y7, Y8, Y9, Y10)
	VMOVUPS Y0, (DI)
	VMOVUPS Y11, 32(DI)
	ADDQ    BX, SI
	ADDQ    BX, DI
	ADDQ    BX, R12
	DECQ    CX
	JNZ     project16Loop
	VZEROUPPER
	RET

// zeros is a vector of zeros for the comparisons of MASK_DOT when all
// sixteen registers hold sums and parameters.
DATA zeros<>+0(SB)/8, $0
DATA zeros<>+8(SB)/8, $0
DATA zeros<>+16(SB)/8, $0
DATA zeros<>+24(SB)/8, $0
GLOBL zeros<>(SB), RODATA|NOPTR, $32

// MASK_DOT sets eight channels of a row of d to grad where y > 0 (as
// maskAVX2 does; z holds zeros), else 0, and adds them to s and
// d·(x − m) to sx.
#define MASK_DOT(off, t, u, m, s, sx, z) \
	VMOVDQU  off(SI), t; \
	VPCMPGTD z, t, t; \
	VPAND    off(DX), t, t; \
	VMOVUPS  t, off(DI); \
	VADDPS   t, s, s; \
	VMOVUPS  off(BX), u; \
	VSUBPS   m, u, u; \
	VMULPS   u, t, t; \
	VADDPS   t, sx, sx

// COPY_DOT is MASK_DOT without the mask: d = grad.
#define COPY_DOT(off, t, u, m, s, sx) \
	VMOVUPS off(DX), t; \
	VMOVUPS t, off(DI); \
	VADDPS  t, s, s; \
	VMOVUPS off(BX), u; \
	VSUBPS  m, u, u; \
	VMULPS  u, t, t; \
	VADDPS  t, sx, sx

// NEXT_ROW moves the four operands to the next row and loops.
#define NEXT_ROW(loop) \
	ADDQ R8, SI; \
	ADDQ R8, DX; \
	ADDQ R8, BX; \
	ADDQ R8, DI; \
	DECQ CX; \
	JNZ  loop

// The fused loops for one to four vectors of channels, the loop of nv
// vectors running through DOTS(nv); below four, Y15 holds the zeros.
#define MASK_DOTS1 MASK_DOT(0, Y0, Y1, Y4, Y8, Y12, Y15)
#define MASK_DOTS2 MASK_DOTS1; MASK_DOT(32, Y2, Y3, Y5, Y9, Y13, Y15)
#define MASK_DOTS3 MASK_DOTS2; MASK_DOT(64, Y0, Y1, Y6, Y10, Y14, Y15)
#define MASK_DOTS4 \
	MASK_DOT(0, Y0, Y1, Y4, Y8, Y12, zeros<>(SB)); \
	MASK_DOT(32, Y2, Y3, Y5, Y9, Y13, zeros<>(SB)); \
	MASK_DOT(64, Y0, Y1, Y6, Y10, Y14, zeros<>(SB)); \
	MASK_DOT(96, Y2, Y3, Y7, Y11, Y15, zeros<>(SB))
#define COPY_DOTS1 COPY_DOT(0, Y0, Y1, Y4, Y8, Y12)
#define COPY_DOTS2 COPY_DOTS1; COPY_DOT(32, Y2, Y3, Y5, Y9, Y13)
#define COPY_DOTS3 COPY_DOTS2; COPY_DOT(64, Y0, Y1, Y6, Y10, Y14)
#define COPY_DOTS4 COPY_DOTS3; COPY_DOT(96, Y2, Y3, Y7, Y11, Y15)

// func maskSumAndDotRowsAVX2(d, y, grad, x *float32, rows, stride int, m *float32, nv int, s, sx *float32, relu bool)
TEXT ·maskSumAndDotRowsAVX2(SB), NOSPLIT, $0-81
	MOVQ d+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ grad+16(FP), DX
	MOVQ x+24(FP), BX
	MOVQ rows+32(FP), CX
	MOVQ stride+40(FP), R8
	SHLQ $2, R8
	MOVQ m+48(FP), R9
	MOVQ nv+56(FP), R10
	MOVQ s+64(FP), R11
	MOVQ sx+72(FP), R12

	// The parameters and sums of the nv vectors; the others' registers
	// are left alone, and not stored back.
	VPXOR   Y15, Y15, Y15
	VMOVUPS (R9), Y4
	VMOVUPS (R11), Y8
	VMOVUPS (R12), Y12
	CMPQ    R10, $2
	JLT     maskDotLoaded
	VMOVUPS 32(R9), Y5
	VMOVUPS 32(R11), Y9
	VMOVUPS 32(R12), Y13
	CMPQ    R10, $3
	JLT     maskDotLoaded
	VMOVUPS 64(R9), Y6
	VMOVUPS 64(R11), Y10
	VMOVUPS 64(R12), Y14
	CMPQ    R10, $4
	JLT     maskDotLoaded
	VMOVUPS 96(R9), Y7
	VMOVUPS 96(R11), Y11
	VMOVUPS 96(R12), Y15

maskDotLoaded:
	CMPB relu+80(FP), $0
	JEQ  copyDot
	CMPQ R10, $2
	JLT  maskDot1
	JEQ  maskDot2
	CMPQ R10, $3
	JEQ  maskDot3

maskDot4:
	MASK_DOTS4
	NEXT_ROW(maskDot4)
	JMP maskDotDone

maskDot3:
	MASK_DOTS3
	NEXT_ROW(maskDot3)
	JMP maskDotDone

maskDot2:
	MASK_DOTS2
	NEXT_ROW(maskDot2)
	JMP maskDotDone

maskDot1:
	MASK_DOTS1
	NEXT_ROW(maskDot1)
	JMP maskDotDone

copyDot:
	CMPQ R10, $2
	JLT  copyDot1
	JEQ  copyDot2
	CMPQ R10, $3
	JEQ  copyDot3

copyDot4:
	COPY_DOTS4
	NEXT_ROW(copyDot4)
	JMP maskDotDone

copyDot3:
	COPY_DOTS3
	NEXT_ROW(copyDot3)
	JMP maskDotDone

copyDot2:
	COPY_DOTS2
	NEXT_ROW(copyDot2)
	JMP maskDotDone

copyDot1:
	COPY_DOTS1
	NEXT_ROW(copyDot1)

maskDotDone:
	VMOVUPS Y8, (R11)
	VMOVUPS Y12, (R12)
	CMPQ    R10, $2
	JLT     maskDotEnd
	VMOVUPS Y9, 32(R11)
	VMOVUPS Y13, 32(R12)
	CMPQ    R10, $3
	JLT     maskDotEnd
	VMOVUPS Y10, 64(R11)
	VMOVUPS Y14, 64(R12)
	CMPQ    R10, $4
	JLT     maskDotEnd
	VMOVUPS Y11, 96(R11)
	VMOVUPS Y15, 96(R12)

maskDotEnd:
	VZEROUPPER
	RET
