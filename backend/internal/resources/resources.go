// Package resources is the bookkeeping a backend device keeps of what it
// handed out (allocations, streams, events, graphs, modules), so that
// closing the device releases whatever the caller left open, in a safe
// order, and reports it. The CUDA and ROCm backends share it.
package resources

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// order is the order Close releases leftovers in: graphs and streams first
// (streams drain their work), memory last. Kinds not listed go last.
var order = []string{"graph", "stream", "event", "module", "allocation"}

// Set tracks the open resources of one device. The zero value is ready.
type Set struct {
	mu     sync.Mutex
	closed bool
	items  map[io.Closer]string
}

// Add records r under its kind. It returns false, and records nothing, once
// the set is closed; the caller then releases r itself.
func (s *Set) Add(r io.Closer, kind string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.items == nil {
		s.items = map[io.Closer]string{}
	}
	s.items[r] = kind
	return true
}

// Remove forgets r (it was closed by its owner).
func (s *Set) Remove(r io.Closer) {
	s.mu.Lock()
	delete(s.items, r)
	s.mu.Unlock()
}

// Closed reports whether Close has been called.
func (s *Set) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close marks the set closed and closes every resource still in it, in
// order. It returns how many there were and a summary such as
// "1 stream(s), 2 allocation(s)" (empty when none). first is false when the
// set was already closed, in which case nothing is done.
func (s *Set) Close() (left int, summary string, first bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, "", false
	}
	s.closed = true
	items := s.items
	s.items = nil
	s.mu.Unlock()

	type entry struct {
		r    io.Closer
		kind string
	}
	rank := func(kind string) int {
		if i := slices.Index(order, kind); i >= 0 {
			return i
		}
		return len(order)
	}
	all := make([]entry, 0, len(items))
	for r, k := range items {
		all = append(all, entry{r, k})
	}
	slices.SortStableFunc(all, func(a, b entry) int { return rank(a.kind) - rank(b.kind) })
	counts := map[string]int{}
	var kinds []string
	for _, e := range all {
		_ = e.r.Close()
		if counts[e.kind] == 0 {
			kinds = append(kinds, e.kind)
		}
		counts[e.kind]++
	}
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s(s)", counts[k], k))
	}
	return len(all), strings.Join(parts, ", "), true
}
