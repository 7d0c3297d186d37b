package capi

import (
	"errors"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
)

// Result is a result code of the C interface (intranodeResult_t). The
// values are part of the ABI and never change; their words are
// intranodeGetErrorString's (cabi/lasterror.c).
type Result int32

// Result codes, as include/intranode.h declares them.
const (
	Success         Result = 0
	InvalidArgument Result = 1
	NotSupported    Result = 2
	Unavailable     Result = 3
	Timeout         Result = 4
	OutOfMemory     Result = 5
	NotFound        Result = 6
	Closed          Result = 7
	PeerFailed      Result = 8
	Internal        Result = 9
	Mismatch        Result = 10
)

// ResultOf maps an error to its code: Success for nil, Mismatch for calls
// that differ across ranks, otherwise the backend code the error carries.
func ResultOf(err error) Result {
	switch {
	case err == nil:
		return Success
	case errors.Is(err, collective.ErrMismatch):
		return Mismatch
	case errors.Is(err, collective.ErrTooLarge), errors.Is(err, collective.ErrNotInitialized):
		return InvalidArgument
	case errors.Is(err, collective.ErrWorldSize), errors.Is(err, collective.ErrHostMismatch),
		errors.Is(err, collective.ErrOverlappingDevices), errors.Is(err, collective.ErrTopology),
		errors.Is(err, collective.ErrNotSupported):
		return NotSupported
	}
	switch backend.CodeOf(err) {
	case backend.CodeInvalidArgument:
		return InvalidArgument
	case backend.CodeNotSupported:
		return NotSupported
	case backend.CodeUnavailable:
		return Unavailable
	case backend.CodeTimeout:
		return Timeout
	case backend.CodeOutOfMemory:
		return OutOfMemory
	case backend.CodeNotFound:
		return NotFound
	case backend.CodeClosed:
		return Closed
	case backend.CodePeerFailed:
		return PeerFailed
	}
	return Internal
}
