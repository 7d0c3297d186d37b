//go:build !purego

package vec

import "golang.org/x/sys/cpu"

// available says the loops of vec_amd64.s can run on this machine (AVX2
// with the OS saving its registers, and F16C for VCVTPS2PH). Read from
// the CPU once, at start, and never written after.
var available = cpu.X86.HasAVX2 && cpu.X86.HasF16C

// Available reports whether this build and machine run the vector loops.
func Available() bool { return available }

// The assembly loops; n is a positive multiple of the loop's block and
// every pointer has n elements (2n line words for the LL loops).

//go:noescape
func widenBF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func narrowBF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func widenF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func narrowF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func sumBF16AVX2(dst, a, b *uint16, n int)

//go:noescape
func sumF16AVX2(dst, a, b *uint16, n int)

//go:noescape
func accBF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func accF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func addF32AVX2(dst *float32, src *float32, n int)

//go:noescape
func maxF32AVX2(dst *float32, src *float32, n int)

//go:noescape
func minF32AVX2(dst *float32, src *float32, n int)

//go:noescape
func toLinesAVX2(dst *uint64, src *uint64, n int, flag uint64)

//go:noescape
func fromLinesAVX2(dst *uint64, src *uint64, n int, flag uint64) bool

// prefix is how many of n elements a loop of this block takes here.
func prefix(n, block int) int {
	if !available {
		return 0
	}
	return n &^ (block - 1)
}

// WidenBF16 sets dst[i] to the float32 of the bfloat16 bit pattern
// src[i] over a prefix of src, whose length it returns; len(dst) >=
// len(src).
func WidenBF16(dst []float32, src []uint16) int {
	n := prefix(len(src), 16)
	if n > 0 {
		widenBF16AVX2(&dst[:n][0], &src[0], n)
	}
	return n
}

// NarrowBF16 rounds src[i] to the nearest bfloat16, ties to even, NaNs
// quieted (bit 6 set), into dst[i] over a prefix of src, whose length it
// returns; len(dst) >= len(src).
func NarrowBF16(dst []uint16, src []float32) int {
	n := prefix(len(src), 16)
	if n > 0 {
		narrowBF16AVX2(&dst[:n][0], &src[0], n)
	}
	return n
}

// WidenF16 sets dst[i] to the float32 of the binary16 bit pattern src[i]
// (exactly; NaN payloads kept, not quieted) over a prefix of src, whose
// length it returns; len(dst) >= len(src).
func WidenF16(dst []float32, src []uint16) int {
	n := prefix(len(src), 16)
	if n > 0 {
		widenF16AVX2(&dst[:n][0], &src[0], n)
	}
	return n
}

// NarrowF16 rounds src[i] to the nearest binary16, ties to even, into
// dst[i] over a prefix of src, whose length it returns; len(dst) >=
// len(src).
func NarrowF16(dst []uint16, src []float32) int {
	n := prefix(len(src), 16)
	if n > 0 {
		narrowF16AVX2(&dst[:n][0], &src[0], n)
	}
	return n
}

// SumBF16 sets dst[i] to the bfloat16 of float32(a[i]) + float32(b[i]),
// rounded once as NarrowBF16 rounds, over a prefix of dst, whose length it
// returns; a and b are at least as long as dst. dst may be a or b.
func SumBF16(dst, a, b []uint16) int {
	n := prefix(len(dst), 16)
	if n > 0 {
		sumBF16AVX2(&dst[0], &a[:n][0], &b[:n][0], n)
	}
	return n
}

// SumF16 is SumBF16 for binary16, rounded as NarrowF16 rounds.
func SumF16(dst, a, b []uint16) int {
	n := prefix(len(dst), 16)
	if n > 0 {
		sumF16AVX2(&dst[0], &a[:n][0], &b[:n][0], n)
	}
	return n
}

// AccBF16 sets acc[i] += float32(x[i]) for the bfloat16 patterns of x over
// a prefix of acc, whose length it returns; len(x) >= len(acc).
func AccBF16(acc []float32, x []uint16) int {
	n := prefix(len(acc), 16)
	if n > 0 {
		accBF16AVX2(&acc[0], &x[:n][0], n)
	}
	return n
}

// AccF16 is AccBF16 for binary16 patterns (widened as WidenF16 does).
func AccF16(acc []float32, x []uint16) int {
	n := prefix(len(acc), 16)
	if n > 0 {
		accF16AVX2(&acc[0], &x[:n][0], n)
	}
	return n
}

// AddF32 sets acc[i] += x[i] over a prefix of acc, whose length it
// returns; len(x) >= len(acc).
func AddF32(acc, x []float32) int {
	n := prefix(len(acc), 16)
	if n > 0 {
		addF32AVX2(&acc[0], &x[:n][0], n)
	}
	return n
}

// MaxF32 sets acc[i] to the IEEE 754 maxNum of acc[i] and x[i] (a NaN
// loses to a number; x's NaN when both are; +0 over -0) over a prefix of
// acc, whose length it returns; len(x) >= len(acc).
func MaxF32(acc, x []float32) int {
	n := prefix(len(acc), 16)
	if n > 0 {
		maxF32AVX2(&acc[0], &x[:n][0], n)
	}
	return n
}

// MinF32 is MaxF32 for minNum (-0 under +0).
func MinF32(acc, x []float32) int {
	n := prefix(len(acc), 16)
	if n > 0 {
		minF32AVX2(&acc[0], &x[:n][0], n)
	}
	return n
}

// ToLines writes payload words as LL line words over a prefix of words,
// whose length it returns: lines[2j] and lines[2j+1] get the bottom and top
// 32 bits of words[j], each with flag in its top 32 bits (flag is already
// shifted there). len(lines) >= 2*len(words).
func ToLines(lines, words []uint64, flag uint64) int {
	n := prefix(len(words), 4)
	if n > 0 {
		toLinesAVX2(&lines[:2*n][0], &words[0], n, flag)
	}
	return n
}

// FromLines is ToLines' inverse over a prefix of words, whose length it
// returns: words[j] from the bottom halves of lines[2j] and lines[2j+1].
// ok is false if any of those line words' top half is not flag's (the
// words are written regardless). len(lines) >= 2*len(words).
func FromLines(words, lines []uint64, flag uint64) (n int, ok bool) {
	n = prefix(len(words), 4)
	if n == 0 {
		return 0, true
	}
	return n, fromLinesAVX2(&words[0], &lines[:2*n][0], n, flag)
}
