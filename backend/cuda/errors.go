//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"github.com/intranode/intranode/backend"
)

// DriverError is a failed CUDA driver call: the entry point and the CUresult
// it returned. The backend's errors wrap it under a backend.Code; reach it
// with errors.As to see the driver's own answer.
type DriverError struct {
	// Op is the driver entry point, e.g. "cuMemCreate".
	Op string
	// Result is the CUresult number.
	Result int
	// Name is the CUresult's name, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
	Name string
	// Description is the driver's description of the result.
	Description string
}

func newDriverError(op string, r int) *DriverError {
	name := resultName(r)
	if name == "" {
		name = fmt.Sprintf("CUresult(%d)", r)
	}
	return &DriverError{Op: op, Result: r, Name: name, Description: resultString(r)}
}

// Error formats the entry point, the result's name and number, and the
// driver's description.
func (e *DriverError) Error() string {
	if e.Description == "" {
		return fmt.Sprintf("%s: %s (%d)", e.Op, e.Name, e.Result)
	}
	return fmt.Sprintf("%s: %s (%d): %s", e.Op, e.Name, e.Result, e.Description)
}

// Code classifies the result for portable callers.
func (e *DriverError) Code() backend.Code { return codeForResult(e.Result) }

// codeForResult maps CUresult numbers to backend codes.
func codeForResult(r int) backend.Code {
	switch r {
	case 1, // CUDA_ERROR_INVALID_VALUE
		101, // CUDA_ERROR_INVALID_DEVICE
		200, // CUDA_ERROR_INVALID_IMAGE
		201, // CUDA_ERROR_INVALID_CONTEXT
		209, // CUDA_ERROR_NO_BINARY_FOR_GPU
		218, // CUDA_ERROR_INVALID_PTX
		222, // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
		400, // CUDA_ERROR_INVALID_HANDLE
		701: // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
		return backend.CodeInvalidArgument
	case 2: // CUDA_ERROR_OUT_OF_MEMORY
		return backend.CodeOutOfMemory
	case 3, // CUDA_ERROR_NOT_INITIALIZED
		4,   // CUDA_ERROR_DEINITIALIZED
		34,  // CUDA_ERROR_STUB_LIBRARY
		35,  // CUDA_ERROR_INSUFFICIENT_DRIVER
		46,  // CUDA_ERROR_DEVICES_UNAVAILABLE
		100, // CUDA_ERROR_NO_DEVICE
		803, // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
		804: // CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
		return backend.CodeUnavailable
	case 500: // CUDA_ERROR_NOT_FOUND
		return backend.CodeNotFound
	case 702: // CUDA_ERROR_LAUNCH_TIMEOUT
		return backend.CodeTimeout
	case 217, // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
		800, // CUDA_ERROR_NOT_PERMITTED
		801: // CUDA_ERROR_NOT_SUPPORTED
		return backend.CodeNotSupported
	}
	if r >= 900 && r <= 909 { // stream-capture misuse
		return backend.CodeInvalidArgument
	}
	return backend.CodeInternal
}

// wrap attaches a backend code and a message to err; nil stays nil. The code
// is the one err already carries, else its driver result's, else
// CodeInternal.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	code := backend.CodeOf(err)
	var de *DriverError
	if code == backend.CodeUnknown && errors.As(err, &de) {
		code = de.Code()
	}
	if code == backend.CodeUnknown {
		code = backend.CodeInternal
	}
	return backend.Wrap(code, err, fmt.Sprintf(format, args...))
}
