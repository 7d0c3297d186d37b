//go:build rocm

package rocm

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/intranode/intranode/backend"
)

// inlineParams is the parameter buffer each stream keeps; larger argument
// lists (rare: the built-in kernels need 88 bytes) are allocated.
const inlineParams = 256

// module is a loaded HIP module.
type module struct {
	d      *device
	h      hipModule
	name   string
	closed atomic.Bool
}

func (m *module) resourceKind() string { return "module" }

// Function looks a kernel up by name; backend.ErrNotFound when the module
// has none of that name.
func (m *module) Function(name string) (backend.Function, error) {
	if m.closed.Load() {
		return nil, backend.Errorf(backend.CodeClosed, "rocm: device %d: module %s is unloaded", m.d.index, m.name)
	}
	h, err := m.d.hip.ModuleFunction(m.d.index, m.h, name)
	if err != nil {
		return nil, wrap(err, "rocm: device %d: kernel %q in module %s", m.d.index, name, m.name)
	}
	return &function{m: m, h: h, name: name}, nil
}

// Close unloads the module.
func (m *module) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.d.untrack(m)
	return wrap(m.d.hip.ModuleUnload(m.d.index, m.h), "rocm: device %d: unloading module %s", m.d.index, m.name)
}

// function is a kernel of a loaded module.
type function struct {
	m    *module
	h    hipFunction
	name string
}

// Name is the kernel's name.
func (f *function) Name() string { return f.name }

// paramSize is the size of the parameter buffer backend.MarshalArgs would
// build for args: each argument at the next offset aligned to its size, the
// total padded to 8.
func paramSize(args []backend.Arg) (int, error) {
	off := 0
	for i, a := range args {
		sz := a.Size()
		if sz != 4 && sz != 8 {
			return 0, backend.Errorf(backend.CodeInvalidArgument, "rocm: kernel argument %d has size %d (want 4 or 8)", i, sz)
		}
		off = alignUp(off, sz) + sz
	}
	return alignUp(off, 8), nil
}

// packParams writes args into buf (of paramSize bytes) exactly as
// backend.MarshalArgs lays them out, without allocating.
func packParams(buf []byte, args []backend.Arg) {
	clear(buf)
	off := 0
	for _, a := range args {
		sz := a.Size()
		off = alignUp(off, sz)
		if sz == 4 {
			binary.LittleEndian.PutUint32(buf[off:], a.U32())
		} else {
			binary.LittleEndian.PutUint64(buf[off:], a.U64())
		}
		off += sz
	}
}

// wordBytes views words as bytes.
func wordBytes(words []uint64) []byte {
	if len(words) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 8*len(words))
}

var (
	_ backend.Module   = (*module)(nil)
	_ backend.Function = (*function)(nil)
)
