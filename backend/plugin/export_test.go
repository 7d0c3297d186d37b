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
