// Package phases times the steps of a multi-step operation (a rendezvous)
// for debug logs: where the time went, step by step.
package phases

import (
	"fmt"
	"strings"
	"time"
)

// Timer accumulates named steps. The zero value is not ready; use Start.
type Timer struct {
	start, last time.Time
	steps       []string
}

// Start begins timing.
func Start() *Timer {
	now := time.Now()
	return &Timer{start: now, last: now}
}

// Mark ends the step called name: the time since the previous mark.
func (t *Timer) Mark(name string) {
	now := time.Now()
	t.steps = append(t.steps, fmt.Sprintf("%s=%v", name, now.Sub(t.last).Round(10*time.Microsecond)))
	t.last = now
}

// Attrs are slog attributes: "phases" (the steps in order) and "total".
func (t *Timer) Attrs() []any {
	return []any{"phases", strings.Join(t.steps, " "), "total", time.Since(t.start).Round(10 * time.Microsecond)}
}
