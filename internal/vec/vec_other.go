//go:build !amd64 || purego

package vec

// Available reports whether this build and machine run the vector loops:
// never in this build (another architecture, or the purego tag).
func Available() bool { return false }

// WidenBF16 does nothing in this build; it returns 0.
func WidenBF16([]float32, []uint16) int { return 0 }

// NarrowBF16 does nothing in this build; it returns 0.
func NarrowBF16([]uint16, []float32) int { return 0 }

// WidenF16 does nothing in this build; it returns 0.
func WidenF16([]float32, []uint16) int { return 0 }

// NarrowF16 does nothing in this build; it returns 0.
func NarrowF16([]uint16, []float32) int { return 0 }

// SumBF16 does nothing in this build; it returns 0.
func SumBF16(_, _, _ []uint16) int { return 0 }

// SumF16 does nothing in this build; it returns 0.
func SumF16(_, _, _ []uint16) int { return 0 }

// AccBF16 does nothing in this build; it returns 0.
func AccBF16([]float32, []uint16) int { return 0 }

// AccF16 does nothing in this build; it returns 0.
func AccF16([]float32, []uint16) int { return 0 }

// AddF32 does nothing in this build; it returns 0.
func AddF32(_, _ []float32) int { return 0 }

// MaxF32 does nothing in this build; it returns 0.
func MaxF32(_, _ []float32) int { return 0 }

// MinF32 does nothing in this build; it returns 0.
func MinF32(_, _ []float32) int { return 0 }

// ToLines does nothing in this build; it returns 0.
func ToLines(_, _ []uint64, _ uint64) int { return 0 }

// FromLines does nothing in this build; it returns 0, true.
func FromLines(_, _ []uint64, _ uint64) (int, bool) { return 0, true }
