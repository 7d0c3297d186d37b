//go:build rocm

package rocm

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/kernels/cpu"
	hipkernels "github.com/intranode/intranode/kernels/hip"
)

// fakeHIP is a HIP runtime in Go for the tests: "device" memory is shared
// memory (memfd, so that file descriptors and IPC handles reach other
// processes), kernels of the built-in module are the Go kernels of package
// kernels/cpu run on stream goroutines, and the rules the backend must keep
// are enforced: a device reaches another's memory only once peer access is
// enabled (or a virtual memory mapping grants it), IPC handles cannot be
// opened in the process that made them, launches must carry the kernels'
// C-layout parameter buffers, modules need a code object for the device's
// architecture.
type fakeHIP struct {
	version int
	devs    []fakeDevice
	// initResult and countResult make hipInit and hipGetDeviceCount fail.
	initResult, countResult int
	// vmm says the runtime has the virtual memory management API;
	// vmmUncached that it can make uncached memory with it (ROCm 7.2).
	vmm, vmmUncached bool
	// noUncachedFlag makes hipExtMallocWithFlags refuse
	// hipDeviceMallocUncached, as ROCm 5 does.
	noUncachedFlag bool
	// noPeer lists pairs hipDeviceCanAccessPeer refuses; brokenPeer pairs
	// whose peer copies silently go nowhere.
	noPeer, brokenPeer map[[2]int]bool
	// failOps makes an entry point fail with the given result.
	failOps map[string]int

	mu      sync.Mutex
	peerOn  map[[2]int]bool
	maps    []*fakeMapping
	phys    map[uint64]int // VMM allocation handle → its memfd
	next    uint64
	streams map[hipStream]*fakeStream
	events  map[hipEvent]*fakeEvent
	modules map[hipModule]int // module → device
	funcs   map[hipFunction]fakeFunc
	graphs  map[hipGraphExec][]fakeOp
	calls   map[string]int
}

// fakeDevice is one GPU of a fakeHIP.
type fakeDevice struct {
	name, bus, arch  string
	ccMajor, ccMinor int
	mem              uint64
	wallKHz          int
}

// newFakeHIP returns n MI250X-like devices (gfx90a) of a ROCm 6.2
// runtime: virtual memory management, but no uncached memory through it.
func newFakeHIP(n int) *fakeHIP {
	h := &fakeHIP{version: 60241134, vmm: true, noPeer: map[[2]int]bool{}, brokenPeer: map[[2]int]bool{},
		failOps: map[string]int{}, peerOn: map[[2]int]bool{}, phys: map[uint64]int{},
		streams: map[hipStream]*fakeStream{}, events: map[hipEvent]*fakeEvent{}, modules: map[hipModule]int{},
		funcs: map[hipFunction]fakeFunc{}, graphs: map[hipGraphExec][]fakeOp{}, calls: map[string]int{}}
	for i := range n {
		h.devs = append(h.devs, fakeDevice{name: "AMD Instinct MI250X", bus: strings.ToUpper(busOf(i)), arch: "gfx90a",
			ccMajor: 9, ccMinor: 0, mem: 64 << 30, wallKHz: 100_000})
	}
	return h
}

// fakeMapping is memory a fakeHIP handed out.
type fakeMapping struct {
	// mem is what the allocation covers; raw the whole mapping behind it.
	mem  []byte
	raw  []byte
	kind string // "device", "shareable", "host", "vmm", "ipc"
	dev  int    // owner; -1 for host memory
	// access lists the devices a virtual memory or IPC mapping was made
	// for; nil means the owner and the devices with peer access to it.
	access map[int]bool
	fd     int // memfd behind device memory, -1 otherwise
	handle uint64
}

func (m *fakeMapping) base() uintptr { return uintptr(unsafe.Pointer(&m.mem[0])) }

// fail returns the injected failure of op, if any, and counts the call.
func (h *fakeHIP) fail(op string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[op]++
	if r := h.failOps[op]; r != 0 {
		return newHIPError(op, r, "", "injected")
	}
	return nil
}

func (h *fakeHIP) called(op string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[op]
}

func (h *fakeHIP) devErr(op string, dev int) error {
	if err := h.fail(op); err != nil {
		return err
	}
	if dev < 0 || dev >= len(h.devs) {
		return newHIPError(op, hipErrorInvalidDevice, "", "")
	}
	return nil
}

func (h *fakeHIP) Library() string { return "libamdhip64.so (fake)" }

func (h *fakeHIP) Init() error {
	if h.initResult != 0 {
		return newHIPError("hipInit", h.initResult, "", "")
	}
	return h.fail("hipInit")
}

func (h *fakeHIP) Version() (int, int, error) { return h.version, h.version, nil }

func (h *fakeHIP) DeviceCount() (int, error) {
	if h.countResult != 0 {
		return 0, newHIPError("hipGetDeviceCount", h.countResult, "", "")
	}
	return len(h.devs), h.fail("hipGetDeviceCount")
}

func (h *fakeHIP) DeviceName(dev int) (string, error) {
	if err := h.devErr("hipDeviceGetName", dev); err != nil {
		return "", err
	}
	return h.devs[dev].name, nil
}

func (h *fakeHIP) DevicePCIBusID(dev int) (string, error) {
	if err := h.devErr("hipDeviceGetPCIBusId", dev); err != nil {
		return "", err
	}
	return h.devs[dev].bus, nil
}

func (h *fakeHIP) DeviceTotalMem(dev int) (uint64, error) {
	if err := h.devErr("hipDeviceTotalMem", dev); err != nil {
		return 0, err
	}
	return h.devs[dev].mem, nil
}

func (h *fakeHIP) DeviceUUID(dev int) ([16]byte, bool, error) {
	var u [16]byte
	if err := h.devErr("hipDeviceGetUuid", dev); err != nil {
		return u, true, err
	}
	copy(u[:], fmt.Sprintf("%016x", 0x5a1b2c3d4e000000+dev))
	return u, true, nil
}

func (h *fakeHIP) DeviceAttribute(dev int, attr deviceAttribute) (int, error) {
	if err := h.devErr("hipDeviceGetAttribute", dev); err != nil {
		return 0, err
	}
	d := h.devs[dev]
	switch attr {
	case attrCanMapHostMemory:
		return 1, nil
	case attrComputeMajor:
		return d.ccMajor, nil
	case attrComputeMinor:
		return d.ccMinor, nil
	case attrWarpSize:
		return 64, nil
	case attrVirtualMemory:
		if h.version < vmmRuntime {
			return 0, newHIPError("hipDeviceGetAttribute", hipErrorInvalidValue, "", "")
		}
		return boolInt(h.vmm), nil
	case attrWallClockRateKHz:
		if h.version < vmmRuntime {
			return 0, newHIPError("hipDeviceGetAttribute", hipErrorInvalidValue, "", "")
		}
		return d.wallKHz, nil
	}
	return 0, newHIPError("hipDeviceGetAttribute", hipErrorInvalidValue, "", "")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (h *fakeHIP) CanAccessPeer(dev, peer int) (bool, error) {
	if err := h.devErr("hipDeviceCanAccessPeer", dev); err != nil {
		return false, err
	}
	return dev != peer && !h.noPeer[[2]int{dev, peer}], nil
}

func (h *fakeHIP) EnablePeerAccess(dev, peer int) error {
	if err := h.devErr("hipDeviceEnablePeerAccess", dev); err != nil {
		return err
	}
	if h.noPeer[[2]int{dev, peer}] {
		return newHIPError("hipDeviceEnablePeerAccess", hipErrorPeerUnsupported, "", "")
	}
	h.mu.Lock()
	h.peerOn[[2]int{dev, peer}] = true
	h.mu.Unlock()
	return nil
}

// memfdMap returns n bytes (rounded up to a page) of shared memory and the
// memfd behind them.
func memfdMap(n int) (int, []byte, error) {
	n = gpu.AlignUp(n, os.Getpagesize())
	fd, err := unix.MemfdCreate("fakehip", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, err
	}
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	mem, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, mem, nil
}

func (h *fakeHIP) add(m *fakeMapping) backend.DevicePtr {
	h.mu.Lock()
	h.maps = append(h.maps, m)
	h.mu.Unlock()
	return backend.DevicePtr(m.base())
}

// remove unmaps the mapping at p made by kind (and closes its memfd).
// The device's work queued before the free still finds the memory, as on
// a GPU, where the free waits for it: the unmapping waits, in the
// background, until every stream of device dev has run what was queued
// on it (a kernel of a comm being closed, stopping at the comm's status
// word, still reads that word).
func (h *fakeHIP) remove(op string, dev int, p backend.DevicePtr, kinds ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, m := range h.maps {
		if backend.DevicePtr(m.base()) == p && slices.Contains(kinds, m.kind) {
			h.maps = slices.Delete(h.maps, k, k+1)
			if m.fd >= 0 {
				unix.Close(m.fd)
			}
			var busy []*fakeStream
			for _, st := range h.streams {
				if st.dev == dev && st.busy() {
					busy = append(busy, st)
				}
			}
			if len(busy) == 0 {
				return unix.Munmap(m.raw)
			}
			go func() {
				for _, st := range busy {
					_ = st.drain()
				}
				_ = unix.Munmap(m.raw)
			}()
			return nil
		}
	}
	return newHIPError(op, hipErrorInvalidDevicePtr, "", fmt.Sprintf("no %v allocation at %#x", kinds, uint64(p)))
}

// reach returns the n bytes at p as device dev may address them.
func (h *fakeHIP) reach(dev int, p backend.DevicePtr, n int) ([]byte, int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.maps {
		base := backend.DevicePtr(m.base())
		end := uint64(base) + uint64(len(m.mem))
		// A range must start inside the mapping: an empty range at the
		// first byte of one allocation is not in the allocation that ends
		// just below it (mmap often places them back to back).
		if p < base || uint64(p) >= end || uint64(p)+uint64(n) > end {
			continue
		}
		ok := m.kind == "host"
		switch {
		case ok:
		case m.access != nil:
			ok = m.access[dev]
		default:
			ok = m.dev == dev || h.peerOn[[2]int{dev, m.dev}]
		}
		if !ok {
			return nil, 0, newHIPError("memory access", hipErrorIllegalAddress, "",
				fmt.Sprintf("device %d may not touch %s memory of device %d at %#x", dev, m.kind, m.dev, uint64(p)))
		}
		off := int(p - base)
		return m.mem[off : off+n : off+n], m.dev, nil
	}
	return nil, 0, newHIPError("memory access", hipErrorIllegalAddress, "", fmt.Sprintf("no allocation holds [%#x, +%d)", uint64(p), n))
}

func (h *fakeHIP) alloc(op string, dev, n int, kind string) (backend.DevicePtr, error) {
	if err := h.devErr(op, dev); err != nil {
		return 0, err
	}
	fd, mem, err := memfdMap(n)
	if err != nil {
		return 0, newHIPError(op, hipErrorOutOfMemory, "", err.Error())
	}
	return h.add(&fakeMapping{mem: mem[:n:n], raw: mem, kind: kind, dev: dev, fd: fd}), nil
}

func (h *fakeHIP) Malloc(c gpu.Ctx, n int) (backend.DevicePtr, error) {
	dev := int(c)
	return h.alloc("hipMalloc", dev, n, "device")
}

func (h *fakeHIP) MallocShareable(dev, n int, t memoryType) (backend.DevicePtr, error) {
	if t == memUncached && h.noUncachedFlag {
		return 0, newHIPError("hipExtMallocWithFlags", hipErrorInvalidValue, "", "")
	}
	return h.alloc("hipExtMallocWithFlags", dev, n, "shareable")
}

func (h *fakeHIP) Free(c gpu.Ctx, p backend.DevicePtr) error {
	dev := int(c)
	if err := h.devErr("hipFree", dev); err != nil {
		return err
	}
	return h.remove("hipFree", dev, p, "device", "shareable")
}

func (h *fakeHIP) HostMalloc(c gpu.Ctx, n int) (unsafe.Pointer, backend.DevicePtr, error) {
	dev := int(c)
	if err := h.devErr("hipHostMalloc", dev); err != nil {
		return nil, 0, err
	}
	mem, err := unix.Mmap(-1, 0, gpu.AlignUp(n, os.Getpagesize()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, 0, newHIPError("hipHostMalloc", hipErrorOutOfMemory, "", err.Error())
	}
	m := &fakeMapping{mem: mem[:n:n], raw: mem, kind: "host", dev: -1, fd: -1}
	p := h.add(m)
	return unsafe.Pointer(&m.mem[0]), p, nil
}

func (h *fakeHIP) HostFree(c gpu.Ctx, host unsafe.Pointer) error {
	dev := int(c)
	if err := h.devErr("hipHostFree", dev); err != nil {
		return err
	}
	return h.remove("hipHostFree", dev, backend.DevicePtr(uintptr(host)), "host")
}

func (h *fakeHIP) CopyHtoD(c gpu.Ctx, dst backend.DevicePtr, src []byte) error {
	dev := int(c)
	if err := h.devErr("hipMemcpyHtoD", dev); err != nil {
		return err
	}
	d, _, err := h.reach(dev, dst, len(src))
	if err != nil {
		return err
	}
	copy(d, src)
	return nil
}

func (h *fakeHIP) CopyDtoH(c gpu.Ctx, dst []byte, src backend.DevicePtr) error {
	dev := int(c)
	if err := h.devErr("hipMemcpyDtoH", dev); err != nil {
		return err
	}
	s, _, err := h.reach(dev, src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

func (h *fakeHIP) copyDtoD(op string, dev int, dst, src backend.DevicePtr, n int) error {
	d, owner, err := h.reach(dev, dst, n)
	if err != nil {
		return err
	}
	s, from, err := h.reach(dev, src, n)
	if err != nil {
		return err
	}
	if h.brokenPeer[[2]int{dev, owner}] || h.brokenPeer[[2]int{dev, from}] {
		return nil // the bytes go nowhere, and nobody says so
	}
	copy(d, s)
	return nil
}

func (h *fakeHIP) CopyDtoD(c gpu.Ctx, dst, src backend.DevicePtr, n int) error {
	dev := int(c)
	if err := h.devErr("hipMemcpyDtoD", dev); err != nil {
		return err
	}
	return h.copyDtoD("hipMemcpyDtoD", dev, dst, src, n)
}

// AddressRange is hipMemGetAddressRange: the allocation holding p.
func (h *fakeHIP) AddressRange(c gpu.Ctx, p backend.DevicePtr) (backend.DevicePtr, int, error) {
	if err := h.devErr("hipMemGetAddressRange", int(c)); err != nil {
		return 0, 0, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.maps {
		base := backend.DevicePtr(m.base())
		if p >= base && uint64(p) < uint64(base)+uint64(len(m.mem)) {
			return base, len(m.mem), nil
		}
	}
	return 0, 0, newHIPError("hipMemGetAddressRange", hipErrorInvalidDevicePtr, "", fmt.Sprintf("no allocation holds %#x", uint64(p)))
}

func (h *fakeHIP) Memset(c gpu.Ctx, dst backend.DevicePtr, v byte, n int) error {
	dev := int(c)
	if err := h.devErr("hipMemsetD8", dev); err != nil {
		return err
	}
	d, _, err := h.reach(dev, dst, n)
	if err != nil {
		return err
	}
	for i := range d {
		d[i] = v
	}
	return nil
}

// IPC handles of the fake: a magic, the exporting pid, the memfd behind
// the allocation in that process and the size. Another process opens the
// memory through /proc/<pid>/fd/<fd>.
const fakeIPCMagic = "FAKEHIP\x00"

func (h *fakeHIP) IPCGetHandle(dev int, p backend.DevicePtr) (ipcHandle, error) {
	var out ipcHandle
	if err := h.devErr("hipIpcGetMemHandle", dev); err != nil {
		return out, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.maps {
		if backend.DevicePtr(m.base()) == p && m.kind == "shareable" {
			copy(out[:], fakeIPCMagic)
			binary.LittleEndian.PutUint32(out[8:], uint32(os.Getpid()))
			binary.LittleEndian.PutUint32(out[12:], uint32(m.fd))
			binary.LittleEndian.PutUint64(out[16:], uint64(len(m.mem)))
			return out, nil
		}
	}
	return out, newHIPError("hipIpcGetMemHandle", hipErrorInvalidDevicePtr, "", "")
}

func (h *fakeHIP) IPCOpenHandle(dev int, hd ipcHandle) (backend.DevicePtr, error) {
	if err := h.devErr("hipIpcOpenMemHandle", dev); err != nil {
		return 0, err
	}
	if !bytes.HasPrefix(hd[:], []byte(fakeIPCMagic)) {
		return 0, newHIPError("hipIpcOpenMemHandle", hipErrorInvalidValue, "", "not a handle")
	}
	pid := int(binary.LittleEndian.Uint32(hd[8:]))
	fd := int(binary.LittleEndian.Uint32(hd[12:]))
	n := int(binary.LittleEndian.Uint64(hd[16:]))
	if pid == os.Getpid() {
		return 0, newHIPError("hipIpcOpenMemHandle", hipErrorInvalidContext, "", "")
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), os.O_RDWR, 0)
	if err != nil {
		return 0, newHIPError("hipIpcOpenMemHandle", hipErrorInvalidHandle, "", err.Error())
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, gpu.AlignUp(n, os.Getpagesize()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return 0, newHIPError("hipIpcOpenMemHandle", hipErrorOutOfMemory, "", err.Error())
	}
	return h.add(&fakeMapping{mem: mem[:n:n], raw: mem, kind: "ipc", dev: dev, fd: -1, access: map[int]bool{dev: true}}), nil
}

func (h *fakeHIP) IPCCloseHandle(dev int, p backend.DevicePtr) error {
	if err := h.devErr("hipIpcCloseMemHandle", dev); err != nil {
		return err
	}
	return h.remove("hipIpcCloseMemHandle", dev, p, "ipc")
}

func (h *fakeHIP) HasVMM() bool { return h.vmm }

// fakeGranularity is the fake's virtual memory granularity.
const fakeGranularity = 2 << 20

func (h *fakeHIP) VMMGranularity(dev int, t memoryType) (int, error) {
	if err := h.devErr("hipMemGetAllocationGranularity", dev); err != nil {
		return 0, err
	}
	if !h.vmm || (t == memUncached && !h.vmmUncached) {
		return 0, newHIPError("hipMemGetAllocationGranularity", hipErrorInvalidValue, "", "")
	}
	return fakeGranularity, nil
}

func accessSet(access []int) map[int]bool {
	m := map[int]bool{}
	for _, d := range access {
		m[d] = true
	}
	return m
}

func (h *fakeHIP) VMMCreate(dev, size int, t memoryType, access []int) (vmmMapping, error) {
	if _, err := h.VMMGranularity(dev, t); err != nil {
		return vmmMapping{}, err
	}
	if err := h.fail("hipMemCreate"); err != nil {
		return vmmMapping{}, err
	}
	size = gpu.AlignUp(size, fakeGranularity)
	fd, mem, err := memfdMap(size)
	if err != nil {
		return vmmMapping{}, newHIPError("hipMemCreate", hipErrorOutOfMemory, "", err.Error())
	}
	h.mu.Lock()
	h.next++
	handle := h.next
	h.phys[handle] = fd
	h.mu.Unlock()
	p := h.add(&fakeMapping{mem: mem, raw: mem, kind: "vmm", dev: dev, fd: -1, access: accessSet(access), handle: handle})
	return vmmMapping{ptr: p, size: size, handle: handle}, nil
}

func (h *fakeHIP) VMMImportFD(dev, fd, size int, access []int) (vmmMapping, error) {
	if err := h.devErr("hipMemImportFromShareableHandle", dev); err != nil {
		return vmmMapping{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || int(st.Size) < size {
		return vmmMapping{}, newHIPError("hipMemImportFromShareableHandle", hipErrorInvalidValue, "", fmt.Sprint(err))
	}
	own, err := unix.Dup(fd)
	if err != nil {
		return vmmMapping{}, newHIPError("hipMemImportFromShareableHandle", hipErrorInvalidValue, "", err.Error())
	}
	mem, err := unix.Mmap(own, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(own)
		return vmmMapping{}, newHIPError("hipMemMap", hipErrorOutOfMemory, "", err.Error())
	}
	h.mu.Lock()
	h.next++
	handle := h.next
	h.phys[handle] = own
	h.mu.Unlock()
	p := h.add(&fakeMapping{mem: mem, raw: mem, kind: "vmm", dev: dev, fd: -1, access: accessSet(access), handle: handle})
	return vmmMapping{ptr: p, size: size, handle: handle}, nil
}

func (h *fakeHIP) VMMExportFD(dev int, m vmmMapping) (int, error) {
	if err := h.devErr("hipMemExportToShareableHandle", dev); err != nil {
		return -1, err
	}
	h.mu.Lock()
	fd, ok := h.phys[m.handle]
	h.mu.Unlock()
	if !ok {
		return -1, newHIPError("hipMemExportToShareableHandle", hipErrorInvalidValue, "", "")
	}
	return unix.Dup(fd)
}

func (h *fakeHIP) VMMRelease(dev int, m vmmMapping) error {
	if err := h.devErr("hipMemRelease", dev); err != nil {
		return err
	}
	h.mu.Lock()
	fd, ok := h.phys[m.handle]
	delete(h.phys, m.handle)
	h.mu.Unlock()
	if !ok {
		return newHIPError("hipMemRelease", hipErrorInvalidValue, "", "")
	}
	unix.Close(fd)
	return h.remove("hipMemUnmap", dev, m.ptr, "vmm")
}

// fakeOp is one piece of queued work.
type fakeOp struct {
	name string
	run  func() error
}

// fakeStream runs its work in order on a goroutine. The first failure
// sticks and is reported by every later query and synchronisation.
type fakeStream struct {
	dev       int
	ops       chan fakeOp
	mu        sync.Mutex
	cond      *sync.Cond
	pending   int
	sticky    error
	capturing bool
	captured  []fakeOp
}

func (s *fakeStream) loop() {
	for op := range s.ops {
		err := op.run()
		s.mu.Lock()
		if err != nil && s.sticky == nil {
			s.sticky = newHIPError("hipStreamSynchronize", 719, "hipErrorLaunchFailure", op.name+": "+err.Error())
		}
		s.pending--
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// enqueue queues op, or records it while the stream is capturing.
func (s *fakeStream) enqueue(op fakeOp) {
	s.mu.Lock()
	if s.capturing {
		s.captured = append(s.captured, op)
		s.mu.Unlock()
		return
	}
	s.pending++
	s.mu.Unlock()
	s.ops <- op
}

func (h *fakeHIP) stream(op string, dev int, s hipStream) (*fakeStream, error) {
	if err := h.devErr(op, dev); err != nil {
		return nil, err
	}
	h.mu.Lock()
	st := h.streams[s]
	h.mu.Unlock()
	if st == nil || st.dev != dev {
		return nil, newHIPError(op, hipErrorInvalidHandle, "", fmt.Sprintf("no stream %#x on device %d", s, dev))
	}
	return st, nil
}

func (h *fakeHIP) StreamCreate(c gpu.Ctx) (hipStream, error) {
	dev := int(c)
	if err := h.devErr("hipStreamCreateWithFlags", dev); err != nil {
		return 0, err
	}
	st := &fakeStream{dev: dev, ops: make(chan fakeOp, 4096)}
	st.cond = sync.NewCond(&st.mu)
	go st.loop()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	s := hipStream(h.next)
	h.streams[s] = st
	return s, nil
}

func (h *fakeHIP) StreamDestroy(c gpu.Ctx, s hipStream) error {
	dev := int(c)
	st, err := h.stream("hipStreamDestroy", dev, s)
	if err != nil {
		return err
	}
	h.mu.Lock()
	delete(h.streams, s)
	h.mu.Unlock()
	close(st.ops)
	return nil
}

func (h *fakeHIP) StreamQuery(c gpu.Ctx, s hipStream) (bool, error) {
	dev := int(c)
	st, err := h.stream("hipStreamQuery", dev, s)
	if err != nil {
		return false, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pending > 0 {
		return false, nil
	}
	return true, st.sticky
}

func (h *fakeHIP) StreamSynchronize(c gpu.Ctx, s hipStream) error {
	dev := int(c)
	st, err := h.stream("hipStreamSynchronize", dev, s)
	if err != nil {
		return err
	}
	return st.drain()
}

// busy reports whether work queued on the stream has yet to run.
func (s *fakeStream) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending > 0
}

// drain waits until the stream has run what was queued on it and returns
// its sticky error.
func (s *fakeStream) drain() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.pending > 0 {
		s.cond.Wait()
	}
	return s.sticky
}

// fakeEvent completes when the work recorded before it has run.
type fakeEvent struct {
	dev       int
	timing    bool
	recorded  atomic.Uint64
	completed atomic.Uint64
	at        atomic.Int64 // UnixNano of the last completion
}

func (h *fakeHIP) event(op string, dev int, e hipEvent) (*fakeEvent, error) {
	if err := h.devErr(op, dev); err != nil {
		return nil, err
	}
	h.mu.Lock()
	ev := h.events[e]
	h.mu.Unlock()
	if ev == nil {
		return nil, newHIPError(op, hipErrorInvalidHandle, "", "")
	}
	return ev, nil
}

func (h *fakeHIP) StreamWaitEvent(c gpu.Ctx, s hipStream, e hipEvent) error {
	dev := int(c)
	st, err := h.stream("hipStreamWaitEvent", dev, s)
	if err != nil {
		return err
	}
	ev, err := h.event("hipStreamWaitEvent", dev, e)
	if err != nil {
		return err
	}
	target := ev.recorded.Load()
	st.enqueue(fakeOp{name: "wait event", run: func() error {
		for ev.completed.Load() < target {
			time.Sleep(10 * time.Microsecond)
		}
		return nil
	}})
	return nil
}

func (h *fakeHIP) CopyDtoDAsync(c gpu.Ctx, dst, src backend.DevicePtr, n int, s hipStream) error {
	dev := int(c)
	st, err := h.stream("hipMemcpyDtoDAsync", dev, s)
	if err != nil {
		return err
	}
	st.enqueue(fakeOp{name: "copy", run: func() error { return h.copyDtoD("hipMemcpyDtoDAsync", dev, dst, src, n) }})
	return nil
}

func (h *fakeHIP) EventCreate(c gpu.Ctx, timing bool) (hipEvent, error) {
	dev := int(c)
	if err := h.devErr("hipEventCreateWithFlags", dev); err != nil {
		return 0, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	e := hipEvent(h.next)
	h.events[e] = &fakeEvent{dev: dev, timing: timing}
	return e, nil
}

func (h *fakeHIP) EventRecord(c gpu.Ctx, e hipEvent, s hipStream) error {
	dev := int(c)
	st, err := h.stream("hipEventRecord", dev, s)
	if err != nil {
		return err
	}
	ev, err := h.event("hipEventRecord", dev, e)
	if err != nil {
		return err
	}
	seq := ev.recorded.Add(1)
	st.enqueue(fakeOp{name: "record", run: func() error {
		ev.at.Store(time.Now().UnixNano())
		ev.completed.Store(seq)
		return nil
	}})
	return nil
}

func (h *fakeHIP) EventQuery(c gpu.Ctx, e hipEvent) (bool, error) {
	dev := int(c)
	ev, err := h.event("hipEventQuery", dev, e)
	if err != nil {
		return false, err
	}
	return ev.completed.Load() >= ev.recorded.Load(), nil
}

func (h *fakeHIP) EventSynchronize(c gpu.Ctx, e hipEvent) error {
	dev := int(c)
	ev, err := h.event("hipEventSynchronize", dev, e)
	if err != nil {
		return err
	}
	for ev.completed.Load() < ev.recorded.Load() {
		time.Sleep(10 * time.Microsecond)
	}
	return nil
}

func (h *fakeHIP) EventElapsed(c gpu.Ctx, start, end hipEvent) (float32, error) {
	dev := int(c)
	s, err := h.event("hipEventElapsedTime", dev, start)
	if err != nil {
		return 0, err
	}
	e, err := h.event("hipEventElapsedTime", dev, end)
	if err != nil {
		return 0, err
	}
	if !s.timing || !e.timing {
		return 0, newHIPError("hipEventElapsedTime", hipErrorInvalidHandle, "", "")
	}
	return float32(e.at.Load()-s.at.Load()) / 1e6, nil
}

func (h *fakeHIP) EventDestroy(c gpu.Ctx, e hipEvent) error {
	dev := int(c)
	if _, err := h.event("hipEventDestroy", dev, e); err != nil {
		return err
	}
	h.mu.Lock()
	delete(h.events, e)
	h.mu.Unlock()
	return nil
}

func (h *fakeHIP) BeginCapture(c gpu.Ctx, s hipStream) error {
	dev := int(c)
	st, err := h.stream("hipStreamBeginCapture", dev, s)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.capturing, st.captured = true, nil
	return nil
}

func (h *fakeHIP) EndCapture(c gpu.Ctx, s hipStream) (hipGraph, hipGraphExec, error) {
	dev := int(c)
	st, err := h.stream("hipStreamEndCapture", dev, s)
	if err != nil {
		return 0, 0, err
	}
	st.mu.Lock()
	ops := st.captured
	st.capturing, st.captured = false, nil
	st.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	e := hipGraphExec(h.next)
	h.graphs[e] = ops
	return hipGraph(h.next), e, nil
}

func (h *fakeHIP) GraphLaunch(c gpu.Ctx, e hipGraphExec, s hipStream) error {
	dev := int(c)
	st, err := h.stream("hipGraphLaunch", dev, s)
	if err != nil {
		return err
	}
	h.mu.Lock()
	ops, ok := h.graphs[e]
	h.mu.Unlock()
	if !ok {
		return newHIPError("hipGraphLaunch", hipErrorInvalidHandle, "", "")
	}
	for _, op := range ops {
		st.enqueue(op)
	}
	return nil
}

func (h *fakeHIP) GraphDestroy(c gpu.Ctx, g hipGraph, e hipGraphExec) error {
	dev := int(c)
	if err := h.devErr("hipGraphExecDestroy", dev); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.graphs[e]; !ok {
		return newHIPError("hipGraphExecDestroy", hipErrorInvalidHandle, "", "")
	}
	delete(h.graphs, e)
	return nil
}

// fakeFunc is a kernel of a loaded module.
type fakeFunc struct {
	dev  int
	name string
	run  cpu.Func
}

func (h *fakeHIP) ModuleLoad(c gpu.Ctx, image []byte) (hipModule, error) {
	dev := int(c)
	if err := h.devErr("hipModuleLoadData", dev); err != nil {
		return 0, err
	}
	archs, err := hipkernels.Architectures(image)
	if err != nil {
		return 0, newHIPError("hipModuleLoadData", hipErrorInvalidImage, "", err.Error())
	}
	if !slices.Contains(archs, h.devs[dev].arch) {
		return 0, newHIPError("hipModuleLoadData", hipErrorNoBinaryForGpu, "", "")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	m := hipModule(h.next)
	h.modules[m] = dev
	return m, nil
}

func (h *fakeHIP) ModuleFunction(c gpu.Ctx, m hipModule, name string) (hipFunction, error) {
	dev := int(c)
	if err := h.devErr("hipModuleGetFunction", dev); err != nil {
		return 0, err
	}
	k, ok := cpu.Kernels()[name]
	h.mu.Lock()
	defer h.mu.Unlock()
	if owner, loaded := h.modules[m]; !loaded || owner != dev {
		return 0, newHIPError("hipModuleGetFunction", hipErrorInvalidHandle, "", "")
	}
	if !ok {
		return 0, newHIPError("hipModuleGetFunction", hipErrorNotFound, "", "")
	}
	h.next++
	f := hipFunction(h.next)
	h.funcs[f] = fakeFunc{dev: dev, name: name, run: k}
	return f, nil
}

func (h *fakeHIP) ModuleUnload(c gpu.Ctx, m hipModule) error {
	dev := int(c)
	if err := h.devErr("hipModuleUnload", dev); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.modules[m]; !ok {
		return newHIPError("hipModuleUnload", hipErrorInvalidHandle, "", "")
	}
	delete(h.modules, m)
	return nil
}

// Argument sizes of the built-in kernels' C signatures (entry.cuh).
var (
	allReduceArgSizes = []int{8, 8, 8, 8, 8, 4, 4, 4, 4, 8, 8, 8, 8}
	signalArgSizes    = []int{8, 4, 4, 4, 4, 4, 8, 8}
)

// decodeParams reads a parameter buffer laid out as a C struct of members
// of the given sizes, as the device would.
func decodeParams(params []byte, sizes []int) ([]backend.Arg, error) {
	var args []backend.Arg
	off := 0
	for _, sz := range sizes {
		off = gpu.AlignUp(off, sz)
		if off+sz > len(params) {
			return nil, fmt.Errorf("parameter buffer of %d bytes ends inside argument %d", len(params), len(args))
		}
		if sz == 4 {
			args = append(args, backend.U32(binary.LittleEndian.Uint32(params[off:])))
		} else {
			args = append(args, backend.U64(binary.LittleEndian.Uint64(params[off:])))
		}
		off += sz
	}
	if want := gpu.AlignUp(off, 8); len(params) != want {
		return nil, fmt.Errorf("parameter buffer of %d bytes, the kernel takes %d", len(params), want)
	}
	return args, nil
}

// fakeView is memory as one device's kernels see it.
type fakeView struct {
	h   *fakeHIP
	dev int
}

func (v fakeView) Bytes(p backend.DevicePtr, n int) ([]byte, error) {
	b, _, err := v.h.reach(v.dev, p, n)
	return b, err
}

func (h *fakeHIP) Launch(c gpu.Ctx, f hipFunction, cfg backend.LaunchConfig, s hipStream, params []byte) error {
	dev := int(c)
	st, err := h.stream("hipModuleLaunchKernel", dev, s)
	if err != nil {
		return err
	}
	h.mu.Lock()
	fn, ok := h.funcs[f]
	h.mu.Unlock()
	if !ok || fn.dev != dev {
		return newHIPError("hipModuleLaunchKernel", hipErrorInvalidHandle, "", "")
	}
	// Every kernel of the module but the three signal kernels is an
	// all-reduce (kernels.KernelName).
	sizes := allReduceArgSizes
	switch fn.name {
	case kernels.BarrierKernel, kernels.PutSignalKernel, kernels.WaitSignalKernel:
		sizes = signalArgSizes
	}
	// The runtime copies the parameters before returning.
	args, err := decodeParams(bytes.Clone(params), sizes)
	if err != nil {
		return newHIPError("hipModuleLaunchKernel", hipErrorInvalidValue, "", err.Error())
	}
	if cfg.Block.X == 0 || cfg.Block.X > 1024 || cfg.Grid.X == 0 {
		return newHIPError("hipModuleLaunchKernel", hipErrorInvalidValue, "", fmt.Sprintf("grid %v block %v", cfg.Grid, cfg.Block))
	}
	st.enqueue(fakeOp{name: "kernel " + fn.name, run: func() error {
		return fn.run(context.Background(), fakeView{h: h, dev: dev}, cfg, args)
	}})
	return nil
}

var _ hipRuntime = (*fakeHIP)(nil)
