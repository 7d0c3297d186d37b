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

// FastLaneCalls reports whether b has a fast lane that is not dropped and
// how many calls its lanes have carried.
func FastLaneCalls(b *Backend) (ok bool, calls uint64) {
	for _, l := range b.conn.fast {
		l.mu.Lock()
		ok = ok || !l.broken
		calls += l.calls
		l.mu.Unlock()
	}
	return ok, calls
}

// DropFastLane closes b's fast lanes, as failed calls do: their calls go
// back to gRPC.
func DropFastLane(b *Backend) { _ = b.conn.fast.Close() }
