package resources

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type res struct {
	name   string
	closed *[]string
}

func (r *res) Close() error {
	*r.closed = append(*r.closed, r.name)
	return nil
}

func TestSetClosesLeftoversInOrder(t *testing.T) {
	var closed []string
	var s Set
	mk := func(name string) *res { return &res{name: name, closed: &closed} }
	a, st, g, gone := mk("a"), mk("s"), mk("g"), mk("gone")
	require.True(t, s.Add(a, "allocation"))
	require.True(t, s.Add(st, "stream"))
	require.True(t, s.Add(g, "graph"))
	require.True(t, s.Add(gone, "event"))
	s.Remove(gone)
	require.False(t, s.Closed())

	left, summary, first := s.Close()
	require.True(t, first)
	require.Equal(t, 3, left)
	require.Equal(t, []string{"g", "s", "a"}, closed)
	require.Equal(t, "1 graph(s), 1 stream(s), 1 allocation(s)", summary)
	require.True(t, s.Closed())

	require.False(t, s.Add(mk("late"), "allocation"), "a closed set records nothing")
	left, summary, first = s.Close()
	require.False(t, first)
	require.Zero(t, left)
	require.Empty(t, summary)
}

func TestSetEmptyClose(t *testing.T) {
	var s Set
	left, summary, first := s.Close()
	require.True(t, first)
	require.Zero(t, left)
	require.Empty(t, summary)
}

func TestOrder(t *testing.T) {
	require.Equal(t, []string{"graph", "stream", "event", "module", "allocation"}, order)
}
