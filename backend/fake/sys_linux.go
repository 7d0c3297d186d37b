//go:build linux

package fake

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
)

// The operating-system primitives of the fake: anonymous and memfd-backed
// shared mappings. Every function returns errors carrying backend codes.

const protRW = unix.PROT_READ | unix.PROT_WRITE

// probeMemfd checks that memfd_create works here.
func probeMemfd() error {
	fd, err := unix.MemfdCreate("intranode-fake-probe", unix.MFD_CLOEXEC)
	if err != nil {
		return backend.Errorf(backend.CodeUnavailable, "fake: memfd_create does not work here: %w", err)
	}
	_ = unix.Close(fd)
	return nil
}

// mapAnon maps length bytes of zeroed private memory. MAP_NORESERVE keeps
// large allocations from being refused by overcommit accounting: pages are
// only committed when touched.
func mapAnon(length int, shared bool) ([]byte, error) {
	flags := unix.MAP_ANONYMOUS | unix.MAP_NORESERVE
	if shared {
		flags |= unix.MAP_SHARED
	} else {
		flags |= unix.MAP_PRIVATE
	}
	b, err := unix.Mmap(-1, 0, length, protRW, flags)
	if err != nil {
		return nil, mmapError(err, length)
	}
	return b, nil
}

// newMemfd creates a memfd of size bytes and maps it shared.
func newMemfd(size int) (*os.File, []byte, error) {
	fd, err := unix.MemfdCreate("intranode-fake", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, backend.Errorf(backend.CodeUnavailable, "fake: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "intranode-fake-memfd")
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		_ = f.Close()
		return nil, nil, mmapError(err, size)
	}
	b, err := unix.Mmap(fd, 0, size, protRW, unix.MAP_SHARED)
	if err != nil {
		_ = f.Close()
		return nil, nil, mmapError(err, size)
	}
	return f, b, nil
}

// fileStat is what an importer checks about a shared descriptor.
type fileStat struct {
	dev, ino uint64
	size     int64
}

func statFile(f *os.File) (fileStat, error) {
	var st unix.Stat_t
	err := control(f, func(fd int) error { return unix.Fstat(fd, &st) })
	if err != nil {
		return fileStat{}, backend.Errorf(backend.CodeInvalidArgument, "fake: fstat of handle descriptor: %w", err)
	}
	return fileStat{dev: st.Dev, ino: st.Ino, size: st.Size}, nil
}

// mapFile maps size bytes of f shared.
func mapFile(f *os.File, size int) ([]byte, error) {
	var b []byte
	err := control(f, func(fd int) error {
		var err error
		b, err = unix.Mmap(fd, 0, size, protRW, unix.MAP_SHARED)
		return err
	})
	if err != nil {
		return nil, mmapError(err, size)
	}
	return b, nil
}

// dupFile returns a new close-on-exec descriptor for f's open file.
func dupFile(f *os.File) (*os.File, error) {
	var nfd int
	err := control(f, func(fd int) error {
		var err error
		nfd, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, backend.Errorf(backend.CodeUnavailable, "fake: duplicating descriptor: %w", err)
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

// fdNumber is f's descriptor number in this process.
func fdNumber(f *os.File) (int, error) {
	var n int
	err := control(f, func(fd int) error { n = fd; return nil })
	return n, err
}

// openProcFD opens another process's (or this one's) descriptor through
// /proc, the way a fabric handle is imported.
func openProcFD(pid, fd int) (*os.File, error) {
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, os.ErrNotExist):
		return nil, backend.Errorf(backend.CodeNotFound, "fake: fabric handle: %s is gone (exporter exited or freed the allocation): %w", path, err)
	case errors.Is(err, os.ErrPermission):
		return nil, backend.Errorf(backend.CodeUnavailable, "fake: fabric handle: no access to %s (another user, or ptrace restrictions): %w", path, err)
	default:
		return nil, backend.Errorf(backend.CodeUnavailable, "fake: fabric handle: opening %s: %w", path, err)
	}
}

func unmap(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return backend.Errorf(backend.CodeInternal, "fake: munmap: %w", err)
	}
	return nil
}

// control runs fn with f's descriptor without switching it to blocking mode
// (as File.Fd would).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var inner error
	if err := rc.Control(func(fd uintptr) { inner = fn(int(fd)) }); err != nil {
		return err
	}
	return inner
}

func mmapError(err error, size int) error {
	if errors.Is(err, unix.ENOMEM) {
		return backend.Errorf(backend.CodeOutOfMemory, "fake: mapping %d bytes: %w", size, err)
	}
	return backend.Errorf(backend.CodeInternal, "fake: mapping %d bytes: %w", size, err)
}
