//go:build cuda

package cuda

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/intranode/intranode/backend"
)

// inlineParams is the parameter buffer Launch keeps on the stack; larger
// argument lists (rare: the built-in kernels need 88 bytes) are allocated.
const inlineParams = 256

// module is a loaded CUDA module.
type module struct {
	d      *device
	h      moduleHandle
	name   string
	closed atomic.Bool
}

func (m *module) resourceKind() string { return "module" }

// Function looks a kernel up by name; backend.ErrNotFound when the module
// has none of that name.
func (m *module) Function(name string) (backend.Function, error) {
	if m.closed.Load() {
		return nil, backend.Errorf(backend.CodeClosed, "cuda: device %d: module %s is unloaded", m.d.index, m.name)
	}
	h, err := moduleFunction(m.d.ctx, m.h, name)
	if err != nil {
		return nil, wrap(err, "cuda: device %d: kernel %q in module %s", m.d.index, name, m.name)
	}
	return &function{m: m, h: h, name: name}, nil
}

// Close unloads the module.
func (m *module) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.d.untrack(m)
	return wrap(moduleUnload(m.d.ctx, m.h), "cuda: device %d: unloading module %s", m.d.index, m.name)
}

// function is a kernel of a loaded module.
type function struct {
	m    *module
	h    funcHandle
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
			return 0, backend.Errorf(backend.CodeInvalidArgument, "cuda: kernel argument %d has size %d (want 4 or 8)", i, sz)
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

var (
	_ backend.Module   = (*module)(nil)
	_ backend.Function = (*function)(nil)
)
