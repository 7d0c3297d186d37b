// Package spans keeps the address ranges of live allocations, so that a
// device can tell whether a range lies inside one without asking anyone
// (backend.RangeChecker).
package spans

import (
	"slices"
	"sync"

	"github.com/intranode/intranode/backend"
)

// Table is a set of address ranges, sorted by base, safe for concurrent
// use. The zero value is empty.
type Table struct {
	mu sync.RWMutex
	s  []Span
}

// Span is one allocation's range.
type Span struct {
	Base backend.DevicePtr
	Size int
}

// Add records [base, base+size).
func (s *Table) Add(base backend.DevicePtr, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.s, base, func(e Span, p backend.DevicePtr) int { return cmpPtr(e.Base, p) })
	s.s = slices.Insert(s.s, i, Span{base, size})
}

// Remove forgets the range starting at base.
func (s *Table) Remove(base backend.DevicePtr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := slices.BinarySearchFunc(s.s, base, func(e Span, p backend.DevicePtr) int { return cmpPtr(e.Base, p) }); ok {
		s.s = slices.Delete(s.s, i, i+1)
	}
}

// Find returns the range holding p.
func (s *Table) Find(p backend.DevicePtr) (Span, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	// The last span starting at or below p.
	i, ok := slices.BinarySearchFunc(s.s, p, func(e Span, p backend.DevicePtr) int { return cmpPtr(e.Base, p) })
	if !ok {
		i--
	}
	if i < 0 || uint64(p) >= uint64(s.s[i].Base)+uint64(s.s[i].Size) {
		return Span{}, false
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

// Check fails with backend.ErrInvalidArgument, naming the range, when
// [p, p+n) starts inside a recorded range and runs past its end; ok is
// false when no recorded range holds p (no verdict).
func (s *Table) Check(p backend.DevicePtr, n int) (ok bool, err error) {
	sp, ok := s.Find(p)
	if !ok {
		return false, nil
	}
	return true, Past(p, n, sp)
}

// Past fails with backend.ErrInvalidArgument when [p, p+n) runs past the
// end of sp.
func Past(p backend.DevicePtr, n int, sp Span) error {
	if end := uint64(sp.Base) + uint64(sp.Size); uint64(p)+uint64(n) > end {
		return backend.Errorf(backend.CodeInvalidArgument, "[%#x, +%d) runs %d bytes past the end of the allocation [%#x, +%d)",
			uint64(p), n, uint64(p)+uint64(n)-end, uint64(sp.Base), sp.Size)
	}
	return nil
}
