//go:build !purego

#include "textflag.h"

// The AVX2 loops of vec_amd64.go. Every routine handles n elements, n a
// positive multiple of its block (16 elements; 4 words for the LL lines);
// the Go caller does the rest.

// ARGS loads a routine's arguments: dst into DI, src into SI and the
// number of its loop's turns (n over its block, 1<<shift) into CX.
#define ARGS(shift) \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX; \
	SHRQ $shift, CX

// NEXT advances both pointers by a turn's bytes and loops to label while
// turns are left; DONE ends a routine.
#define NEXT(srcStep, dstStep, label) \
	ADDQ $srcStep, SI; \
	ADDQ $dstStep, DI; \
	DECQ CX; \
	JNZ  label

#define DONE \
	VZEROUPPER; \
	RET

DATA bf16round<>+0(SB)/4, $0x00007fff
DATA bf16one<>+0(SB)/4, $0x00000001
DATA absmask<>+0(SB)/4, $0x7fffffff
DATA f32inf<>+0(SB)/4, $0x7f800000
DATA bf16quiet<>+0(SB)/4, $0x00000040
DATA f16em<>+0(SB)/4, $0x00007fff
DATA f16sign<>+0(SB)/4, $0x00008000
DATA f16maxfinite<>+0(SB)/4, $0x0f7fffff
DATA rebias<>+0(SB)/4, $0x77800000
GLOBL bf16round<>(SB), RODATA|NOPTR, $4
GLOBL bf16one<>(SB), RODATA|NOPTR, $4
GLOBL absmask<>(SB), RODATA|NOPTR, $4
GLOBL f32inf<>(SB), RODATA|NOPTR, $4
GLOBL bf16quiet<>(SB), RODATA|NOPTR, $4
GLOBL f16em<>(SB), RODATA|NOPTR, $4
GLOBL f16sign<>(SB), RODATA|NOPTR, $4
GLOBL f16maxfinite<>(SB), RODATA|NOPTR, $4
GLOBL rebias<>(SB), RODATA|NOPTR, $4

// ARGS3 loads a three-operand routine's arguments: dst into DI, its two
// sources into SI and DX, and its loop's turns into CX.
#define ARGS3(shift) \
	MOVQ dst+0(FP), DI; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), DX; \
	MOVQ n+24(FP), CX; \
	SHRQ $shift, CX

// NEXT3 is NEXT with the second source advanced as the first.
#define NEXT3(srcStep, dstStep, label) \
	ADDQ $srcStep, DX; \
	NEXT(srcStep, dstStep, label)

// BF16CONSTS loads NARROWBF16's constants; F16CONSTS WIDENF16's.
#define BF16CONSTS \
	VPBROADCASTD bf16round<>(SB), Y10; \
	VPBROADCASTD bf16one<>(SB), Y11; \
	VPBROADCASTD absmask<>(SB), Y12; \
	VPBROADCASTD f32inf<>(SB), Y13; \
	VPBROADCASTD bf16quiet<>(SB), Y14

#define F16CONSTS \
	VPBROADCASTD f16sign<>(SB), Y10; \
	VPBROADCASTD f16em<>(SB), Y11; \
	VPBROADCASTD f16maxfinite<>(SB), Y12; \
	VPBROADCASTD rebias<>(SB), Y13; \
	VPBROADCASTD f32inf<>(SB), Y14

// LOADW zero-extends the sixteen 16-bit patterns at P into the dwords of
// A and B.
#define LOADW(P, A, B) \
	VPMOVZXWD (P), A; \
	VPMOVZXWD 16(P), B

// BF16UP makes the bfloat16 patterns in A's and B's dwords float32.
#define BF16UP(A, B) \
	VPSLLD $16, A, A; \
	VPSLLD $16, B, B

// STOREF32 stores the sixteen float32 of A and B at DI; ACCF32 first adds
// them to the sixteen already there, those as the first operand (whose
// NaN x86 keeps when both are NaN, as in the Go loops and addF32AVX2).
// Y8 and Y9 are clobbered.
#define STOREF32(A, B) \
	VMOVUPS A, (DI); \
	VMOVUPS B, 32(DI)

#define ACCF32(A, B) \
	VMOVUPS (DI), Y8; \
	VMOVUPS 32(DI), Y9; \
	VADDPS  A, Y8, A; \
	VADDPS  B, Y9, B; \
	STOREF32(A, B)

// NARROWBF16 rounds the eight float32 bit patterns in V to bfloat16 in the
// low halves of V's dwords: x + 0x7fff + (x>>16 & 1), then >> 16; NaNs
// (|x| > inf) become x>>16 | 0x40. Y10–Y14 hold the constants; Y1–Y3 are
// clobbered.
#define NARROWBF16(V) \
	VPSRLD    $16, V, Y1; \
	VPAND     Y11, Y1, Y2; \
	VPADDD    Y10, V, Y3; \
	VPADDD    Y2, Y3, Y3; \
	VPSRLD    $16, Y3, Y3; \
	VPOR      Y14, Y1, Y1; \
	VPAND     Y12, V, Y2; \
	VPCMPGTD  Y13, Y2, Y2; \
	VPBLENDVB Y2, Y1, Y3, V

// PUTBF16 rounds the sixteen float32 of A and B to bfloat16 (NARROWBF16)
// and stores them at DI; PUTF16 rounds them to binary16 (VCVTPS2PH with
// immediate 0 rounds to nearest even whatever MXCSR says), XA and XB
// naming A's and B's low halves.
#define PUTBF16(A, B) \
	NARROWBF16(A); \
	NARROWBF16(B); \
	VPACKUSDW B, A, A; \
	VPERMQ    $0xd8, A, A; \
	VMOVDQU   A, (DI)

#define PUTF16(A, B, XA, XB) \
	VCVTPS2PH $0, A, XA; \
	VCVTPS2PH $0, B, XB; \
	VMOVDQU   XA, (DI); \
	VMOVDQU   XB, 16(DI)

// WIDENF16 widens the eight float16 bit patterns in V's dwords to float32
// as F16ToF32 does: the exponent and mantissa moved up 13 bits and
// multiplied by 2^112 (exact; it normalises subnormals), infinities and
// NaNs given an all-ones exponent instead, the sign put back. Y10–Y14 hold
// the constants; Y1–Y3 are clobbered.
#define WIDENF16(V) \
	VPAND     Y10, V, Y1; \
	VPAND     Y11, V, V; \
	VPSLLD    $16, Y1, Y1; \
	VPSLLD    $13, V, V; \
	VMULPS    Y13, V, Y2; \
	VPCMPGTD  Y12, V, Y3; \
	VPOR      Y14, V, V; \
	VPBLENDVB Y3, V, Y2, V; \
	VPOR      Y1, V, V

// func widenBF16AVX2(dst *float32, src *uint16, n int)
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	ARGS(4)

widenbf16loop:
	LOADW(SI, Y0, Y1)
	BF16UP(Y0, Y1)
	STOREF32(Y0, Y1)
	NEXT(32, 64, widenbf16loop)
	DONE

// func narrowBF16AVX2(dst *uint16, src *float32, n int)
TEXT ·narrowBF16AVX2(SB), NOSPLIT, $0-24
	ARGS(4)
	BF16CONSTS

narrowbf16loop:
	VMOVDQU (SI), Y4
	VMOVDQU 32(SI), Y5
	PUTBF16(Y4, Y5)
	NEXT(64, 32, narrowbf16loop)
	DONE

// func widenF16AVX2(dst *float32, src *uint16, n int)
TEXT ·widenF16AVX2(SB), NOSPLIT, $0-24
	ARGS(4)
	F16CONSTS

widenf16loop:
	LOADW(SI, Y4, Y5)
	WIDENF16(Y4)
	WIDENF16(Y5)
	STOREF32(Y4, Y5)
	NEXT(32, 64, widenf16loop)
	DONE

// func narrowF16AVX2(dst *uint16, src *float32, n int)
TEXT ·narrowF16AVX2(SB), NOSPLIT, $0-24
	ARGS(4)

narrowf16loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	PUTF16(Y0, Y1, X0, X1)
	NEXT(64, 32, narrowf16loop)
	DONE

// func sumBF16AVX2(dst *uint16, a *uint16, b *uint16, n int)
// dst = bfloat16(float32(a) + float32(b)), rounded once. Each 32-bit word
// of a vector holds two elements: the even one in its low half, widened
// by a shift up, and the odd one in its high half, widened by clearing the
// low half, so no element changes lanes. Both sums round as NARROWBF16
// does, x + 0x7fff + (x>>16 & 1), the even one then shifted down, the odd
// one masked; NARROWBF16's NaN blend is not needed here: a NaN sum of two
// widened bfloat16 values is quiet with a clear low half (an operand's
// NaN, quieted, or the default NaN), which the rounding leaves as it is,
// the bits NARROWBF16 gives it.
TEXT ·sumBF16AVX2(SB), NOSPLIT, $0-32
	ARGS3(4)
	VPBROADCASTD bf16round<>(SB), Y10
	VPBROADCASTD bf16one<>(SB), Y11
	VPCMPEQD     Y15, Y15, Y15
	VPSLLD       $16, Y15, Y15

sumbf16loop:
	VMOVDQU (SI), Y0
	VMOVDQU (DX), Y1
	VPSLLD  $16, Y0, Y2
	VPSLLD  $16, Y1, Y3
	VPAND   Y15, Y0, Y0
	VPAND   Y15, Y1, Y1
	VADDPS  Y3, Y2, Y2
	VADDPS  Y1, Y0, Y0
	VPSRLD  $16, Y2, Y4
	VPAND   Y11, Y4, Y4
	VPADDD  Y10, Y2, Y2
	VPADDD  Y4, Y2, Y2
	VPSRLD  $16, Y2, Y2
	VPSRLD  $16, Y0, Y5
	VPAND   Y11, Y5, Y5
	VPADDD  Y10, Y0, Y0
	VPADDD  Y5, Y0, Y0
	VPAND   Y15, Y0, Y0
	VPOR    Y2, Y0, Y0
	VMOVDQU Y0, (DI)
	NEXT3(32, 32, sumbf16loop)
	DONE

// func sumF16AVX2(dst *uint16, a *uint16, b *uint16, n int)
// dst = float16(float32(a) + float32(b)), rounded once.
TEXT ·sumF16AVX2(SB), NOSPLIT, $0-32
	ARGS3(4)
	F16CONSTS

sumf16loop:
	LOADW(SI, Y4, Y5)
	LOADW(DX, Y6, Y7)
	WIDENF16(Y4)
	WIDENF16(Y5)
	WIDENF16(Y6)
	WIDENF16(Y7)
	VADDPS Y6, Y4, Y4
	VADDPS Y7, Y5, Y5
	PUTF16(Y4, Y5, X4, X5)
	NEXT3(32, 32, sumf16loop)
	DONE

// func accBF16AVX2(dst *float32, src *uint16, n int)
// dst += float32(src).
TEXT ·accBF16AVX2(SB), NOSPLIT, $0-24
	ARGS(4)

accbf16loop:
	LOADW(SI, Y0, Y1)
	BF16UP(Y0, Y1)
	ACCF32(Y0, Y1)
	NEXT(32, 64, accbf16loop)
	DONE

// func accF16AVX2(dst *float32, src *uint16, n int)
// dst += float32(src).
TEXT ·accF16AVX2(SB), NOSPLIT, $0-24
	ARGS(4)
	F16CONSTS

accf16loop:
	LOADW(SI, Y4, Y5)
	WIDENF16(Y4)
	WIDENF16(Y5)
	ACCF32(Y4, Y5)
	NEXT(32, 64, accf16loop)
	DONE

// func addF32AVX2(dst *float32, src *float32, n int)
TEXT ·addF32AVX2(SB), NOSPLIT, $0-24
	ARGS(4)

addf32loop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VADDPS  (SI), Y0, Y0
	VADDPS  32(SI), Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	NEXT(64, 64, addf32loop)
	DONE

// MAXNUM and MINNUM set A to maxNum(A, X) and minNum(A, X) as maxNum and
// minNum in internal/numeric do: VMAXPS/VMINPS return their second source (A) when
// either is NaN or both are zero, so equal operands take A AND X (max: +0
// over -0) or A OR X (min: -0 over +0), and a NaN in A takes X. Y2–Y4 are
// clobbered.
#define MAXNUM(A, X) \
	VMAXPS    A, X, Y2; \
	VCMPPS    $0, X, A, Y3; \
	VANDPS    X, A, Y4; \
	VBLENDVPS Y3, Y4, Y2, Y2; \
	VCMPPS    $3, A, A, Y3; \
	VBLENDVPS Y3, X, Y2, A

#define MINNUM(A, X) \
	VMINPS    A, X, Y2; \
	VCMPPS    $0, X, A, Y3; \
	VORPS     X, A, Y4; \
	VBLENDVPS Y3, Y4, Y2, Y2; \
	VCMPPS    $3, A, A, Y3; \
	VBLENDVPS Y3, X, Y2, A

// func maxF32AVX2(dst *float32, src *float32, n int)
TEXT ·maxF32AVX2(SB), NOSPLIT, $0-24
	ARGS(3)

maxf32loop:
	VMOVUPS (DI), Y0
	VMOVUPS (SI), Y1
	MAXNUM(Y0, Y1)
	VMOVUPS Y0, (DI)
	NEXT(32, 32, maxf32loop)
	DONE

// func minF32AVX2(dst *float32, src *float32, n int)
TEXT ·minF32AVX2(SB), NOSPLIT, $0-24
	ARGS(3)

minf32loop:
	VMOVUPS (DI), Y0
	VMOVUPS (SI), Y1
	MINNUM(Y0, Y1)
	VMOVUPS Y0, (DI)
	NEXT(32, 32, minf32loop)
	DONE

DATA evens<>+0(SB)/4, $0
DATA evens<>+4(SB)/4, $2
DATA evens<>+8(SB)/4, $4
DATA evens<>+12(SB)/4, $6
DATA evens<>+16(SB)/4, $1
DATA evens<>+20(SB)/4, $3
DATA evens<>+24(SB)/4, $5
DATA evens<>+28(SB)/4, $7
GLOBL evens<>(SB), RODATA|NOPTR, $32

// func toLinesAVX2(dst *uint64, src *uint64, n int, flag uint64)
// Every 32-bit half of the payload words becomes one line word: zero
// extended, with flag (already shifted up 32 bits) in its top half.
TEXT ·toLinesAVX2(SB), NOSPLIT, $0-32
	ARGS(2)
	MOVQ         flag+24(FP), X0
	VPBROADCASTQ X0, Y0

tolinesloop:
	VPMOVZXDQ (SI), Y1
	VPMOVZXDQ 16(SI), Y2
	VPOR      Y0, Y1, Y1
	VPOR      Y0, Y2, Y2
	VMOVDQU   Y1, (DI)
	VMOVDQU   Y2, 32(DI)
	NEXT(32, 64, tolinesloop)
	DONE

// func fromLinesAVX2(dst *uint64, src *uint64, n int, flag uint64) bool
// The inverse of toLinesAVX2: the bottom halves of the line words packed
// into payload words; true if every line word's top half is flag's.
TEXT ·fromLinesAVX2(SB), NOSPLIT, $0-33
	ARGS(2)
	MOVQ         flag+24(FP), X0
	VPBROADCASTQ X0, Y0
	VPCMPEQD     Y1, Y1, Y1
	VPSLLQ       $32, Y1, Y1
	VPCMPEQD     Y7, Y7, Y7
	VMOVDQU      evens<>(SB), Y6

fromlinesloop:
	VMOVDQU     (SI), Y2
	VMOVDQU     32(SI), Y3
	VPAND       Y1, Y2, Y4
	VPAND       Y1, Y3, Y5
	VPCMPEQQ    Y0, Y4, Y4
	VPCMPEQQ    Y0, Y5, Y5
	VPAND       Y4, Y7, Y7
	VPAND       Y5, Y7, Y7
	VPERMD      Y2, Y6, Y2
	VPERMD      Y3, Y6, Y3
	VINSERTI128 $1, X3, Y2, Y2
	VMOVDQU     Y2, (DI)
	ADDQ        $64, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         fromlinesloop
	VPMOVMSKB   Y7, AX
	CMPL        AX, $0xffffffff
	SETEQ       ret+32(FP)
	VZEROUPPER
	RET
