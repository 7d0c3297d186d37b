package gpu

import (
	"slices"
	"sync"

	"github.com/intranode/intranode/backend"
)

// spans are the address ranges of a device's own live allocations, sorted
// by base, so CheckRange answers for them without a driver call.
type spans struct {
	mu sync.RWMutex
	s  []span
}

type span struct {
	base backend.DevicePtr
	size int
}

func (s *spans) add(base backend.DevicePtr, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.s, base, func(e span, p backend.DevicePtr) int { return cmpPtr(e.base, p) })
	s.s = slices.Insert(s.s, i, span{base, size})
}

func (s *spans) remove(base backend.DevicePtr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := slices.BinarySearchFunc(s.s, base, func(e span, p backend.DevicePtr) int { return cmpPtr(e.base, p) }); ok {
		s.s = slices.Delete(s.s, i, i+1)
	}
}

// find returns the span holding p.
func (s *spans) find(p backend.DevicePtr) (span, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	// The last span starting at or below p.
	i, ok := slices.BinarySearchFunc(s.s, p, func(e span, p backend.DevicePtr) int { return cmpPtr(e.base, p) })
	if !ok {
		i--
	}
	if i < 0 || uint64(p) >= uint64(s.s[i].base)+uint64(s.s[i].size) {
		return span{}, false
	}
	return s.s[i], true
}

func cmpPtr(a, b backend.DevicePtr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
