package fake

import (
	"context"
	"encoding/binary"
	"os"
	"sync"

	"github.com/intranode/intranode/backend"
)

type allocKind uint8

const (
	allocPlain allocKind = iota
	allocShareable
	allocHost
	allocImported
)

func (k allocKind) String() string {
	switch k {
	case allocPlain:
		return "plain"
	case allocShareable:
		return "shareable"
	case allocHost:
		return "host"
	default:
		return "imported"
	}
}

// allocation is every kind of fake memory: an mmap registered in the
// process address map.
type allocation struct {
	dev     *device
	kind    allocKind
	m       *mapping
	size    int
	handle  backend.HandleKind // shareable: the kind it may be exported as
	file    *os.File           // shareable: the memfd
	charged uint64             // bytes counted against the device's limit
	once    sync.Once
}

// hostAllocation adds the host view.
type hostAllocation struct{ *allocation }

// Bytes is the host view of the memory.
func (h hostAllocation) Bytes() []byte { return h.m.data[:h.size:h.size] }

// Ptr is the address of the mapping in this process.
func (a *allocation) Ptr() backend.DevicePtr { return backend.DevicePtr(a.m.base) }

// Size is the usable size.
func (a *allocation) Size() int { return a.size }

// Export returns a handle for a shareable allocation, of the kind it was
// allocated for.
func (a *allocation) Export(kind backend.HandleKind) (backend.Handle, error) {
	if a.kind != allocShareable {
		return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "fake: %s allocations cannot be exported (use AllocShareable)", a.kind)
	}
	if a.m.closed.Load() {
		return backend.Handle{}, backend.Errorf(backend.CodeClosed, "fake: export of a closed allocation")
	}
	if kind != a.handle {
		return backend.Handle{}, backend.Errorf(backend.CodeNotSupported,
			"fake: allocation was made for %s handles, cannot export as %s", a.handle, kind)
	}
	switch kind {
	case backend.HandleFD:
		f, err := dupFile(a.file)
		if err != nil {
			return backend.Handle{}, err
		}
		return backend.Handle{Kind: backend.HandleFD, File: f, Size: a.size}, nil
	case backend.HandleFabric:
		opaque, err := encodeFabric(a.file, a.size)
		if err != nil {
			return backend.Handle{}, err
		}
		return backend.Handle{Kind: backend.HandleFabric, Opaque: opaque, Size: a.size}, nil
	}
	return backend.Handle{}, backend.Errorf(backend.CodeInvalidArgument, "fake: unknown handle kind %d", kind)
}

// Close unmaps the memory (once every kernel using it has returned) and
// gives its bytes back to the device.
func (a *allocation) Close() error {
	a.once.Do(func() {
		addresses.retire(a.m)
		if a.file != nil {
			_ = a.file.Close()
		}
		if a.charged > 0 {
			a.dev.st.used.Add(-int64(a.charged))
		}
		a.dev.forget(a)
		a.dev.log.Debug("fake: free", "device", a.dev.st.index, "kind", a.kind.String(), "ptr", a.m.base, "size", a.size)
	})
	return nil
}

// roundUp rounds n up to a multiple of g (a power of two).
func roundUp(n, g int) int { return (n + g - 1) &^ (g - 1) }

// charge reserves n bytes of the device's memory limit.
func (st *deviceState) charge(n uint64) error {
	for {
		used := st.used.Load()
		if uint64(used)+n > st.limit {
			return backend.Errorf(backend.CodeOutOfMemory,
				"fake: device %d: allocating %d bytes with %d of %d in use", st.index, n, used, st.limit)
		}
		if st.used.CompareAndSwap(used, used+int64(n)) {
			return nil
		}
	}
}

// newAlloc makes an allocation of kind on device d and registers it.
func (d *device) newAlloc(ctx context.Context, kind allocKind, size int, handle backend.HandleKind) (*allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: device %d: %s allocation of %d bytes", d.st.index, kind, size)
	}
	length := roundUp(size, os.Getpagesize())
	a := &allocation{dev: d, kind: kind, size: size, handle: handle}
	if kind == allocShareable {
		a.size = length
	}
	if kind != allocHost {
		if err := d.st.charge(uint64(length)); err != nil {
			return nil, err
		}
		a.charged = uint64(length)
	}
	var (
		data []byte
		err  error
	)
	if kind == allocShareable {
		a.file, data, err = newMemfd(length)
	} else {
		data, err = mapAnon(length, kind == allocHost)
	}
	if err != nil {
		d.st.used.Add(-int64(a.charged))
		return nil, err
	}
	a.m = newMapping(data, a.size, d.log)
	addresses.insert(a.m)
	if err := d.track(a); err != nil {
		a.release()
		return nil, err
	}
	d.log.Debug("fake: alloc", "device", d.st.index, "kind", kind.String(), "ptr", a.m.base, "size", a.size)
	return a, nil
}

// release undoes newAlloc for an allocation its device refused.
func (a *allocation) release() {
	addresses.retire(a.m)
	if a.file != nil {
		_ = a.file.Close()
	}
	a.dev.st.used.Add(-int64(a.charged))
}

// Fabric handles name the exporter's memfd as /proc/<pid>/fd/<fd>, with the
// file's identity so that an importer can tell a reused descriptor number
// from the original.
const (
	fabricMagic = "INFAKEF1"
	fabricLen   = len(fabricMagic) + 4 + 4 + 8 + 8 + 8
)

type fabricHandle struct {
	pid, fd  int
	dev, ino uint64
	size     int
}

func encodeFabric(f *os.File, size int) ([]byte, error) {
	fd, err := fdNumber(f)
	if err != nil {
		return nil, err
	}
	st, err := statFile(f)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, fabricLen)
	b = append(b, fabricMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(os.Getpid()))
	b = binary.LittleEndian.AppendUint32(b, uint32(fd))
	b = binary.LittleEndian.AppendUint64(b, st.dev)
	b = binary.LittleEndian.AppendUint64(b, st.ino)
	b = binary.LittleEndian.AppendUint64(b, uint64(size))
	return b, nil
}

func decodeFabric(b []byte) (fabricHandle, error) {
	if len(b) != fabricLen || string(b[:len(fabricMagic)]) != fabricMagic {
		return fabricHandle{}, backend.Errorf(backend.CodeInvalidArgument, "fake: %d opaque bytes are not a fake fabric handle", len(b))
	}
	b = b[len(fabricMagic):]
	return fabricHandle{
		pid:  int(binary.LittleEndian.Uint32(b[0:])),
		fd:   int(binary.LittleEndian.Uint32(b[4:])),
		dev:  binary.LittleEndian.Uint64(b[8:]),
		ino:  binary.LittleEndian.Uint64(b[16:]),
		size: int(binary.LittleEndian.Uint64(b[24:])),
	}, nil
}

// importHandle maps an exported allocation into this process.
func (d *device) importHandle(ctx context.Context, h backend.Handle) (*allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if h.Size <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: import of a handle of size %d", h.Size)
	}
	var (
		f    *os.File
		want *fabricHandle
	)
	switch h.Kind {
	case backend.HandleFD:
		if h.File == nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: fd handle without a file")
		}
		f = h.File
	case backend.HandleFabric:
		if !d.b.cfg.fabric {
			return nil, backend.Errorf(backend.CodeNotSupported, "fake: fabric handles are off (WithFabric)")
		}
		fh, err := decodeFabric(h.Opaque)
		if err != nil {
			return nil, err
		}
		if fh.size != h.Size {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: fabric handle is for %d bytes, Handle.Size says %d", fh.size, h.Size)
		}
		if f, err = openProcFD(fh.pid, fh.fd); err != nil {
			return nil, err
		}
		defer f.Close()
		want = &fh
	default:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: import of a %s handle", h.Kind)
	}
	st, err := statFile(f)
	if err != nil {
		return nil, err
	}
	if want != nil && (st.dev != want.dev || st.ino != want.ino) {
		return nil, backend.Errorf(backend.CodeNotFound,
			"fake: fabric handle is stale: descriptor %d of pid %d is no longer the exported memory", want.fd, want.pid)
	}
	if st.size != int64(h.Size) {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: handle says %d bytes, the descriptor holds %d", h.Size, st.size)
	}
	data, err := mapFile(f, h.Size)
	if err != nil {
		return nil, err
	}
	a := &allocation{dev: d, kind: allocImported, size: h.Size, m: newMapping(data, h.Size, d.log)}
	addresses.insert(a.m)
	if err := d.track(a); err != nil {
		a.release()
		return nil, err
	}
	d.log.Debug("fake: import", "device", d.st.index, "kind", h.Kind.String(), "ptr", a.m.base, "size", a.size)
	return a, nil
}
