//go:build race

package race

import (
	"runtime"
	"unsafe"
)

// Enabled reports whether the program is built with -race.
const Enabled = true

// Read tells the race detector that the caller read every element of s.
func Read[T any](s []T) {
	if len(s) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(unsafe.SliceData(s)), len(s)*int(unsafe.Sizeof(s[0])))
	}
}

// Write tells the race detector that the caller wrote every element of s.
func Write[T any](s []T) {
	if len(s) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(unsafe.SliceData(s)), len(s)*int(unsafe.Sizeof(s[0])))
	}
}
