package connectivity

import (
	"fmt"
	"sync"
)

// Access is a cached peer-access answer.
type Access uint8

// The three states of a PeerCache entry.
const (
	AccessUnknown Access = iota
	AccessYes
	AccessNo
)

// PeerCache remembers whether device i can access device j's memory. Each
// pair is queried at most once, lazily, on first use; the diagonal is always
// yes and never queried. On the first yes for a pair, enable (if non-nil) is
// called once to turn peer access on. A query error is not cached, so a
// transient failure can be retried.
type PeerCache struct {
	mu     sync.Mutex
	n      int
	state  [][]Access
	query  func(i, j int) (bool, error)
	enable func(i, j int) error
}

// NewPeerCache returns a cache for n devices.
func NewPeerCache(n int, query func(i, j int) (bool, error), enable func(i, j int) error) *PeerCache {
	st := make([][]Access, n)
	for i := range st {
		st[i] = make([]Access, n)
		st[i][i] = AccessYes
	}
	return &PeerCache{n: n, state: st, query: query, enable: enable}
}

// Get returns whether i can access j, querying (and enabling) on first use.
func (c *PeerCache) Get(i, j int) (bool, error) {
	if i < 0 || j < 0 || i >= c.n || j >= c.n {
		return false, fmt.Errorf("connectivity: peer access (%d,%d) out of range [0,%d)", i, j, c.n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state[i][j] {
	case AccessYes:
		return true, nil
	case AccessNo:
		return false, nil
	}
	ok, err := c.query(i, j)
	if err != nil {
		return false, fmt.Errorf("connectivity: peer access query (%d,%d): %w", i, j, err)
	}
	if ok && c.enable != nil {
		if err := c.enable(i, j); err != nil {
			return false, fmt.Errorf("connectivity: enabling peer access (%d,%d): %w", i, j, err)
		}
	}
	if ok {
		c.state[i][j] = AccessYes
	} else {
		c.state[i][j] = AccessNo
	}
	return ok, nil
}

// State returns the cached state of (i, j) without querying.
func (c *PeerCache) State(i, j int) Access {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || j < 0 || i >= c.n || j >= c.n {
		return AccessUnknown
	}
	return c.state[i][j]
}
