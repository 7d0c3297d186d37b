//go:build rocm

package rocm

import (
	"errors"
	"fmt"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
)

// hipError_t values the backend tests for by number. They are the same in
// ROCm 5 and 6.
const (
	hipSuccess                = 0
	hipErrorInvalidValue      = 1
	hipErrorOutOfMemory       = 2
	hipErrorNotInitialized    = 3
	hipErrorNoDevice          = 100
	hipErrorInvalidDevice     = 101
	hipErrorInvalidContext    = 201
	hipErrorNoBinaryForGpu    = 209
	hipErrorNotFound          = 500
	hipErrorNotReady          = 600
	hipErrorPeerAlreadyOn     = 704
	hipErrorNotSupported      = 801
	hipErrorPeerUnsupported   = 217
	hipErrorInvalidDevicePtr  = 17
	hipErrorInvalidHandle     = 400
	hipErrorUnknown           = 999
	hipErrorLaunchOutOfRes    = 701
	hipErrorLaunchTimeOut     = 702
	hipErrorInsufficientDrv   = 35
	hipErrorDeinitialized     = 4
	hipErrorInvalidImage      = 200
	hipErrorIllegalAddress    = 700
	hipErrorCaptureFirst      = 900
	hipErrorCaptureLast       = 909
	hipErrorSharedObjectInit  = 303
	hipErrorInvalidConfigured = 9
)

// hipErrorNames spells the results the backend meets most, for errors made
// where the runtime cannot name them (it failed to load, or a test's fake
// runtime made them).
var hipErrorNames = map[int]string{
	hipErrorInvalidValue:     "hipErrorInvalidValue",
	hipErrorOutOfMemory:      "hipErrorOutOfMemory",
	hipErrorNotInitialized:   "hipErrorNotInitialized",
	hipErrorNoDevice:         "hipErrorNoDevice",
	hipErrorInvalidDevice:    "hipErrorInvalidDevice",
	hipErrorInvalidContext:   "hipErrorInvalidContext",
	hipErrorNoBinaryForGpu:   "hipErrorNoBinaryForGpu",
	hipErrorNotFound:         "hipErrorNotFound",
	hipErrorNotReady:         "hipErrorNotReady",
	hipErrorPeerAlreadyOn:    "hipErrorPeerAccessAlreadyEnabled",
	hipErrorNotSupported:     "hipErrorNotSupported",
	hipErrorPeerUnsupported:  "hipErrorPeerAccessUnsupported",
	hipErrorInvalidDevicePtr: "hipErrorInvalidDevicePointer",
	hipErrorInvalidHandle:    "hipErrorInvalidHandle",
	hipErrorIllegalAddress:   "hipErrorIllegalAddress",
	hipErrorUnknown:          "hipErrorUnknown",
}

// HIPError is a failed HIP runtime call: the entry point (Op), the
// hipError_t it returned (Result), its name, e.g. "hipErrorOutOfMemory",
// and the runtime's description of it. The backend's errors wrap it under
// a backend.Code; reach it with errors.As to see the runtime's own answer.
type HIPError struct{ gpu.CallError }

// newHIPError names r with the given name and description, falling back to
// hipErrorNames and then to the number.
func newHIPError(op string, r int, name, description string) *HIPError {
	if name == "" {
		name = hipErrorNames[r]
	}
	if name == "" {
		name = fmt.Sprintf("hipError_t(%d)", r)
	}
	if description == name {
		description = "" // ROCm 5 describes some results by their name
	}
	return &HIPError{gpu.CallError{Op: op, Result: r, Name: name, Description: description}}
}

// Code classifies the result for portable callers.
func (e *HIPError) Code() backend.Code { return codeForHIP(e.Result) }

// codeForHIP maps hipError_t numbers to backend codes.
func codeForHIP(r int) backend.Code {
	switch r {
	case hipErrorInvalidValue, hipErrorInvalidConfigured, hipErrorInvalidDevicePtr, hipErrorInvalidDevice,
		hipErrorInvalidImage, hipErrorInvalidContext, hipErrorNoBinaryForGpu, hipErrorInvalidHandle,
		hipErrorLaunchOutOfRes:
		return backend.CodeInvalidArgument
	case hipErrorOutOfMemory:
		return backend.CodeOutOfMemory
	case hipErrorNotInitialized, hipErrorDeinitialized, hipErrorInsufficientDrv, hipErrorNoDevice,
		hipErrorSharedObjectInit:
		return backend.CodeUnavailable
	case hipErrorNotFound:
		return backend.CodeNotFound
	case hipErrorLaunchTimeOut:
		return backend.CodeTimeout
	case hipErrorPeerUnsupported, hipErrorNotSupported:
		return backend.CodeNotSupported
	}
	if r >= hipErrorCaptureFirst && r <= hipErrorCaptureLast { // stream-capture misuse
		return backend.CodeInvalidArgument
	}
	return backend.CodeInternal
}

// isHIP reports whether err is a *HIPError with result r.
func isHIP(err error, r int) bool {
	var he *HIPError
	return errors.As(err, &he) && he.Result == r
}

// SMIError is a failed amdsmi or rocm-smi call.
type SMIError struct {
	// Library is "amdsmi" or "rocm-smi".
	Library string
	// Op is the entry point, e.g. "rsmi_is_P2P_accessible".
	Op string
	// Status is the amdsmi_status_t or rsmi_status_t number.
	Status int
	// Description is the library's description of the status.
	Description string
}

// Error formats the entry point, the status and its description.
func (e *SMIError) Error() string {
	if e.Description == "" {
		return fmt.Sprintf("%s: %s: status %d", e.Library, e.Op, e.Status)
	}
	return fmt.Sprintf("%s: %s: %s (status %d)", e.Library, e.Op, e.Description, e.Status)
}

// Code classifies the status: "not supported" is CodeNotSupported, every
// other failure CodeUnavailable (the topology cannot be read).
func (e *SMIError) Code() backend.Code {
	if e.NotSupported() {
		return backend.CodeNotSupported
	}
	return backend.CodeUnavailable
}

// smiNotSupported is the "not supported" status of both libraries
// (AMDSMI_STATUS_NOT_SUPPORTED and RSMI_STATUS_NOT_SUPPORTED are 2).
const smiNotSupported = 2

// NotSupported reports whether the library said the query is not supported
// on this device or driver.
func (e *SMIError) NotSupported() bool { return e.Status == smiNotSupported }
