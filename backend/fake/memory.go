package fake

import (
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/intranode/intranode/backend"
)

// AddressMap resolves device pointers to the mappings behind them. A fake
// DevicePtr is the real address of an mmap in this process, so every fake
// device of every Backend in the process shares one address space, just as
// GPUs under unified addressing do: a kernel on device 0 can dereference a
// pointer that device 3 allocated or imported. That is why the map is one
// process-wide table (see Addresses) rather than per device.
//
// Resolution never converts integers back to pointers: the map holds each
// mapping's []byte and returns subslices of it.
type AddressMap struct {
	mu sync.RWMutex
	// live is sorted by base; mappings never overlap because the kernel
	// gives each live mmap its own range.
	live []*mapping
}

// The process-wide address map, a registry of live mappings shared by every
// device (see AddressMap for why it is not per device).
var addresses = &AddressMap{}

// Addresses returns the process-wide address map.
func Addresses() *AddressMap { return addresses }

// mapping is one mmap: data is the whole mapping, size the usable part.
// refs counts the owner (until Close) and every Lease holding it; the
// memory is unmapped when it drops to zero, so a kernel that resolved a
// pointer keeps valid memory even if the allocation is closed under it.
type mapping struct {
	base   uint64
	data   []byte
	size   int
	refs   atomic.Int64
	closed atomic.Bool
	log    *slog.Logger
}

func newMapping(data []byte, size int, log *slog.Logger) *mapping {
	m := &mapping{
		base: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(data)))),
		data: data,
		size: size,
		log:  log,
	}
	m.refs.Store(1)
	return m
}

// contains reports whether [p, p+n) lies inside the usable part.
func (m *mapping) contains(p backend.DevicePtr, n int) bool {
	addr := uint64(p)
	return addr >= m.base && addr-m.base <= uint64(m.size) && uint64(n) <= uint64(m.size)-(addr-m.base)
}

func (m *mapping) slice(p backend.DevicePtr, n int) []byte {
	off := int(uint64(p) - m.base)
	return m.data[off : off+n : off+n]
}

func (m *mapping) ref() { m.refs.Add(1) }

func (m *mapping) unref() {
	if m.refs.Add(-1) == 0 {
		if err := unmap(m.data); err != nil {
			m.log.Debug("fake: unmap failed", "base", m.base, "err", err)
		}
	}
}

// insert makes m resolvable.
func (a *AddressMap) insert(m *mapping) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := sort.Search(len(a.live), func(i int) bool { return a.live[i].base >= m.base })
	a.live = append(a.live, nil)
	copy(a.live[i+1:], a.live[i:])
	a.live[i] = m
}

// retire makes m unresolvable and drops the owner's reference.
func (a *AddressMap) retire(m *mapping) {
	m.closed.Store(true)
	a.mu.Lock()
	i := sort.Search(len(a.live), func(i int) bool { return a.live[i].base >= m.base })
	if i < len(a.live) && a.live[i] == m {
		a.live = append(a.live[:i], a.live[i+1:]...)
	}
	a.mu.Unlock()
	m.unref()
}

// find returns the live mapping holding [p, p+n), taking a reference on it
// when pin is set. It runs under the read lock, so a mapping found here
// still holds its owner reference and can be pinned safely.
func (a *AddressMap) find(p backend.DevicePtr, n int, pin bool) (*mapping, error) {
	if n < 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: negative length %d at device pointer %#x", n, uint64(p))
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	i := sort.Search(len(a.live), func(i int) bool { return a.live[i].base > uint64(p) }) - 1
	if i < 0 || uint64(p)-a.live[i].base > uint64(a.live[i].size) {
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"fake: device pointer %#x is not inside a live allocation", uint64(p))
	}
	m := a.live[i]
	if !m.contains(p, n) {
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"fake: device pointer %#x + %d bytes runs past the end of allocation %#x (size %d) by %d bytes",
			uint64(p), n, m.base, m.size, uint64(p)+uint64(n)-m.base-uint64(m.size))
	}
	if pin {
		m.ref()
	}
	return m, nil
}

// Bytes returns n bytes at p, aliasing the mapping. It fails with an error
// matching backend.ErrInvalidArgument, naming p, when [p, p+n) is not inside
// one live allocation. The slice is only valid while the allocation stays
// open; code that may race with Close (kernels) resolves through a Lease.
func (a *AddressMap) Bytes(p backend.DevicePtr, n int) ([]byte, error) {
	m, err := a.find(p, n, false)
	if err != nil {
		return nil, err
	}
	return m.slice(p, n), nil
}

// Lease returns a Memory that keeps every allocation it resolves mapped
// until Release, so slices it hands out stay valid even if the allocation
// is closed meanwhile (new resolutions of a closed allocation still fail).
// Every kernel runs with its own Lease.
func (a *AddressMap) Lease() *Lease { return &Lease{space: a} }

// Lease is a Memory whose resolutions pin their mappings until Release. It
// is safe for concurrent use (a kernel may resolve from several
// goroutines).
type Lease struct {
	space    *AddressMap
	mu       sync.Mutex
	held     []*mapping
	released bool
}

// Bytes is AddressMap.Bytes, pinning the mapping for the lease's lifetime.
func (l *Lease) Bytes(p backend.DevicePtr, n int) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil, backend.Errorf(backend.CodeClosed, "fake: resolving %#x through a released lease (memory used after its kernel returned)", uint64(p))
	}
	// Kernels resolve the same few buffers over and over; look in what is
	// already held before taking the map's lock.
	for _, m := range l.held {
		if m.contains(p, n) {
			if m.closed.Load() {
				break // let find report the pointer as not live
			}
			return m.slice(p, n), nil
		}
	}
	m, err := l.space.find(p, n, true)
	if err != nil {
		return nil, err
	}
	l.held = append(l.held, m)
	return m.slice(p, n), nil
}

// Release drops every pin. Slices returned by Bytes must not be used
// afterwards. Releasing twice is a no-op.
func (l *Lease) Release() {
	l.mu.Lock()
	held := l.held
	l.held, l.released = nil, true
	l.mu.Unlock()
	for _, m := range held {
		m.unref()
	}
}
