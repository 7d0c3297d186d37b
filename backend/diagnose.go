package backend

import "context"

// Diagnostic is one line of a health report (`intranode doctor`).
type Diagnostic struct {
	// Check names what was looked at ("driver", "nvml", "fabric GPU0").
	Check string `json:"check"`
	// OK is false when the check found a problem.
	OK bool `json:"ok"`
	// Detail is what was found (versions, states).
	Detail string `json:"detail"`
	// Hint says what to do about a problem.
	Hint string `json:"hint,omitempty"`
}

// Diagnoser is implemented by backends with checks of their own beyond the
// portable ones (driver and library versions, fabric state…).
type Diagnoser interface {
	Diagnostics(ctx context.Context) []Diagnostic
}
