//go:build cuda

package cuda

import (
	"fmt"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
)

// DriverError is a failed CUDA driver call: the entry point (Op), the
// CUresult it returned (Result), its name, e.g. "CUDA_ERROR_OUT_OF_MEMORY",
// and the driver's description of it. The backend's errors wrap it under a
// backend.Code; reach it with errors.As to see the driver's own answer.
type DriverError struct{ gpu.CallError }

func newDriverError(op string, r int) *DriverError {
	name := resultName(r)
	if name == "" {
		name = fmt.Sprintf("CUresult(%d)", r)
	}
	return &DriverError{gpu.CallError{Op: op, Result: r, Name: name, Description: resultString(r)}}
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
