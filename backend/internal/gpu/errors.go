package gpu

import (
	"errors"
	"fmt"

	"github.com/intranode/intranode/backend"
)

// coder is a vendor's error type (CUDA's DriverError, HIP's HIPError):
// it classifies its own result.
type coder interface {
	error
	Code() backend.Code
}

// Wrap attaches a backend code and a message to err; nil stays nil. The
// code is the one err already carries, else its vendor result's, else
// backend.CodeInternal.
func Wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	code := backend.CodeOf(err)
	var ce coder
	if code == backend.CodeUnknown && errors.As(err, &ce) {
		code = ce.Code()
	}
	if code == backend.CodeUnknown {
		code = backend.CodeInternal
	}
	return backend.Wrap(code, err, fmt.Sprintf(format, args...))
}

// CallError is a failed call of a vendor's API (the CUDA driver, the HIP
// runtime): the entry point and the result number it returned. Each
// backend's error type embeds it and adds the Code that classifies the
// result.
type CallError struct {
	// Op is the entry point, e.g. "cuMemCreate" or "hipMalloc".
	Op string
	// Result is the result number (CUresult, hipError_t).
	Result int
	// Name is the result's name, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
	Name string
	// Description is the vendor's description of the result.
	Description string
}

// Error formats the entry point, the result's name and number, and the
// vendor's description.
func (e *CallError) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Op, e.Name, e.Result)
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}

// LoaderErrorBufferSize is the room the C loaders (the driver's, the
// collective library's, the SMI library's) give a failed load's reason.
const LoaderErrorBufferSize = 1024

// AlignUp rounds n up to a multiple of a (a > 0).
func AlignUp(n, a int) int {
	if a <= 1 {
		return n
	}
	return (n + a - 1) / a * a
}
