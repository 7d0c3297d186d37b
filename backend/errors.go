package backend

import (
	"errors"
	"fmt"
)

// Code classifies backend errors so portable code can react to them without
// knowing which backend produced them.
type Code int

// Error codes. Every error a backend returns should carry one, applied with
// Errorf or Wrap; callers test them with errors.Is against the Err… values.
const (
	CodeUnknown Code = iota
	CodeNotSupported
	CodeUnavailable
	CodeInvalidArgument
	CodeTimeout
	CodeOutOfMemory
	CodeNotFound
	CodeClosed
	CodePeerFailed
	CodeInternal
)

var codeNames = map[Code]string{
	CodeUnknown:         "unknown",
	CodeNotSupported:    "not supported",
	CodeUnavailable:     "unavailable",
	CodeInvalidArgument: "invalid argument",
	CodeTimeout:         "timeout",
	CodeOutOfMemory:     "out of memory",
	CodeNotFound:        "not found",
	CodeClosed:          "closed",
	CodePeerFailed:      "peer failed",
	CodeInternal:        "internal",
}

// String names the code.
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code(%d)", int(c))
}

// Sentinel errors, one per code, for errors.Is.
var (
	ErrNotSupported    = &Error{Code: CodeNotSupported}
	ErrUnavailable     = &Error{Code: CodeUnavailable}
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument}
	ErrTimeout         = &Error{Code: CodeTimeout}
	ErrOutOfMemory     = &Error{Code: CodeOutOfMemory}
	ErrNotFound        = &Error{Code: CodeNotFound}
	ErrClosed          = &Error{Code: CodeClosed}
	ErrPeerFailed      = &Error{Code: CodePeerFailed}
	ErrInternal        = &Error{Code: CodeInternal}
)

// Error is a backend error with a code. Two *Error values match under
// errors.Is when their codes match, so errors.Is(err, ErrTimeout) is true for
// any timeout whatever its message.
type Error struct {
	Code Code
	Msg  string
	Err  error // underlying driver error, reachable with errors.As

	// wrapped is the fmt.Errorf result behind an Errorf message: its %w
	// operands are reachable, but its text is already in Msg.
	wrapped error
}

// Error formats the message.
func (e *Error) Error() string {
	switch {
	case e.Msg == "" && e.Err == nil:
		return e.Code.String()
	case e.Err == nil:
		return e.Msg
	case e.Msg == "":
		return e.Code.String() + ": " + e.Err.Error()
	default:
		return e.Msg + ": " + e.Err.Error()
	}
}

// Unwrap returns the underlying errors: Err, and the operands of any %w
// verb in the message.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Err != nil {
		out = append(out, e.Err)
	}
	if e.wrapped != nil {
		switch w := e.wrapped.(type) {
		case interface{ Unwrap() []error }:
			out = append(out, w.Unwrap()...)
		case interface{ Unwrap() error }:
			if u := w.Unwrap(); u != nil {
				out = append(out, u)
			}
		}
	}
	return out
}

// Is matches any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an error with the code and a formatted message. A %w verb
// wraps as with fmt.Errorf: the wrapped error is reachable with errors.Is
// and errors.As, and its text appears once, where the verb put it.
func Errorf(code Code, format string, args ...any) error {
	inner := fmt.Errorf(format, args...)
	return &Error{Code: code, Msg: inner.Error(), wrapped: inner}
}

// Wrap attaches a code and context to err; it returns nil for a nil err.
func Wrap(code Code, err error, msg string) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Msg: msg, Err: err}
}

// CodeOf returns the code of the first *Error in err's chain, CodeUnknown if
// none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeUnknown
}
