//go:build linux

package plugin

import (
	"context"
	"os"

	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
)

// SharedHostAllocator is implemented by a served backend's devices that can
// allocate host memory the host process can map too. Host allocations are
// the one kind of memory both sides touch: kernels in the plugin write
// status words there and the host reads them through Bytes without a copy,
// so the host must map the same pages.
//
// AllocHostShared returns a host allocation as Device.AllocHost would, and a
// descriptor (which the caller closes) whose mapping from offset 0 is the
// allocation's Bytes. A CUDA backend, say, creates a memfd, maps it,
// registers the mapping with cuMemHostRegister and returns the memfd.
//
// Devices without it still serve AllocHost when their shareable memory is
// itself host memory, as the fake's memfds are: the server proves that once
// per device (write through a mapping of an exported descriptor, read back
// through the device, and the reverse) and backs host allocations with
// shareable ones. Otherwise AllocHost through the plugin fails with
// backend.ErrNotSupported.
type SharedHostAllocator interface {
	AllocHostShared(ctx context.Context, size int) (backend.HostAllocation, *os.File, error)
}

// allocHost serves Device.AllocHost: the allocation plus a descriptor for
// the host's view of it.
func (s *server) allocHost(ctx context.Context, req *allocReq) (*allocReply, error) {
	d, _, err := lookup[backend.Device](s, req.Dev, kindDevice)
	if err != nil {
		return nil, err
	}
	if sh, ok := d.(SharedHostAllocator); ok {
		h, f, err := sh.AllocHostShared(ctx, req.Size)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return s.finishHostAlloc(ctx, req.Dev, h, f, req.Size, roundPage(h.Size()))
	}
	if err := s.shareableIsHostMemory(ctx, d); err != nil {
		return nil, backend.Errorf(backend.CodeNotSupported,
			"plugin: device %d cannot give the host process a view of its host memory (implement plugin.SharedHostAllocator): %w", d.Index(), err)
	}
	a, err := d.AllocShareable(ctx, req.Size, backend.HandleFD)
	if err != nil {
		return nil, err
	}
	h, err := a.Export(backend.HandleFD)
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	defer h.File.Close()
	return s.finishHostAlloc(ctx, req.Dev, a, h.File, req.Size, a.Size())
}

// finishHostAlloc sends the host view's descriptor and registers a.
func (s *server) finishHostAlloc(ctx context.Context, dev uint64, a backend.Allocation, f *os.File, size, mapSize int) (*allocReply, error) {
	token, err := s.fds.send(ctx, f)
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	id, err := s.addAlloc(dev, a)
	if err != nil {
		return nil, err
	}
	return &allocReply{ID: id, Ptr: a.Ptr(), Size: size, Token: token, MapSize: mapSize}, nil
}

// shareableIsHostMemory reports (nil) whether mapping an exported
// descriptor of d's shareable memory shows the same bytes the device reads
// and writes; the answer is cached per device index.
func (s *server) shareableIsHostMemory(ctx context.Context, d backend.Device) error {
	s.hostMemMu.Lock()
	defer s.hostMemMu.Unlock()
	if err, ok := s.hostMem[d.Index()]; ok {
		return err
	}
	err := probeHostMemory(ctx, s.b, d)
	if err != nil && backend.CodeOf(err) == backend.CodeTimeout {
		return err // not an answer: ask again next time
	}
	s.hostMem[d.Index()] = err
	s.log.Debug("plugin: shareable memory as host memory", "device", d.Index(), "err", err)
	return err
}

func probeHostMemory(ctx context.Context, b backend.Backend, d backend.Device) (err error) {
	if !b.Capabilities().Has(backend.CapHandleFD) {
		return backend.Errorf(backend.CodeNotSupported, "backend %s has no descriptor handles", b.Name())
	}
	a, err := d.AllocShareable(ctx, 1, backend.HandleFD)
	if err != nil {
		return err
	}
	defer a.Close()
	h, err := a.Export(backend.HandleFD)
	if err != nil {
		return err
	}
	defer h.File.Close()
	view, err := mapShared(h.File, a.Size())
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unmapShared(view); err == nil {
			err = uerr
		}
	}()
	const hostWrote, deviceWrote = 0x5a, 0xc3
	view[0] = hostWrote
	got := make([]byte, 1)
	if err := d.CopyFromDevice(ctx, got, a.Ptr()); err != nil {
		return err
	}
	if got[0] != hostWrote {
		return backend.Errorf(backend.CodeNotSupported, "a write through the descriptor's mapping is not seen by the device")
	}
	if err := d.Memset(ctx, a.Ptr(), deviceWrote, 1); err != nil {
		return err
	}
	if view[0] != deviceWrote {
		return backend.Errorf(backend.CodeNotSupported, "a device write is not seen through the descriptor's mapping")
	}
	return nil
}

// mapShared maps n bytes of f shared.
func mapShared(f *os.File, n int) ([]byte, error) {
	if n <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: mapping %d bytes", n)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: mapping %s: %w", f.Name(), err)
	}
	var (
		b    []byte
		merr error
	)
	if err := rc.Control(func(fd uintptr) {
		b, merr = unix.Mmap(int(fd), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}); err != nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: mapping %s: %w", f.Name(), err)
	}
	if merr != nil {
		return nil, backend.Errorf(backend.CodeNotSupported, "plugin: mapping %d bytes of %s: %w", n, f.Name(), merr)
	}
	return b, nil
}

func unmapShared(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return backend.Errorf(backend.CodeInternal, "plugin: munmap: %w", err)
	}
	return nil
}

func roundPage(n int) int {
	p := os.Getpagesize()
	return (n + p - 1) / p * p
}
