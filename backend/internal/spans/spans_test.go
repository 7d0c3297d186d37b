package spans

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

func TestSpans(t *testing.T) {
	var s Table
	s.Add(0x3000, 0x100)
	s.Add(0x1000, 0x1000) // [0x1000, 0x2000), back to back with nothing
	s.Add(0x2000, 0x10)
	s.Remove(0x9999) // not a base: nothing
	for _, c := range []struct {
		p    backend.DevicePtr
		base backend.DevicePtr
		ok   bool
	}{
		{0x0fff, 0, false},
		{0x1000, 0x1000, true},
		{0x1fff, 0x1000, true},
		{0x2000, 0x2000, true},
		{0x2010, 0, false},
		{0x30ff, 0x3000, true},
		{0x3100, 0, false},
	} {
		sp, ok := s.Find(c.p)
		require.Equal(t, c.ok, ok, "%#x", uint64(c.p))
		require.Equal(t, c.base, sp.Base, "%#x", uint64(c.p))
	}
	s.Remove(0x2000)
	_, ok := s.Find(0x2000)
	require.False(t, ok, "removed")
	_, ok = s.Find(0x1800)
	require.True(t, ok, "its neighbour stays")
}
