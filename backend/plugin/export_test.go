//go:build linux

package plugin

import "time"

// SetCloseGrace shortens Close's wait for an orderly stop; the returned
// function restores it.
func SetCloseGrace(d time.Duration) (restore func()) {
	old := closeGrace
	closeGrace = d
	return func() { closeGrace = old }
}

// FastLaneCalls reports whether b has a fast lane and how many calls it
// has carried.
func FastLaneCalls(b *Backend) (ok bool, calls uint64) {
	l := b.conn.fast
	if l == nil {
		return false, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.broken, l.calls
}

// DropFastLane closes b's fast lane, as a failed call does: its calls go
// back to gRPC.
func DropFastLane(b *Backend) { _ = b.conn.fast.Close() }
