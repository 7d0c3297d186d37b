package gpu

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/intranode/intranode/backend"
)

// inlineParams is the parameter buffer each stream keeps; larger argument
// lists (rare: the built-in kernels need 88 bytes) are allocated.
const inlineParams = 256

// module is a loaded module.
type module struct {
	d       *Device
	h       Handle
	name    string
	closed  atomic.Bool
	builtin *builtinModule // the device's shared built-in module; nil: h is this handle's own
}

// builtinModule is the built-in kernel module of one device (Core.builtins):
// loaded by the first handle that asks, unloaded when the last module
// handle on it is closed.
type builtinModule struct {
	ready chan struct{} // closed when the load has ended
	h     Handle
	err   error
	refs  int // module handles on it, under Core.builtinMu
}

// builtin returns d's device's built-in module, loading it with load if no
// handle holds it, and counts one more holder. Handles of other devices
// load theirs at the same time; those of this device wait for its load.
func (c *Core) builtin(d *Device, load func() (Handle, error)) (*builtinModule, error) {
	c.builtinMu.Lock()
	b := c.builtins[d.index]
	if b != nil {
		b.refs++
		c.builtinMu.Unlock()
		<-b.ready
		if b.err != nil {
			return nil, b.err
		}
		return b, nil
	}
	b = &builtinModule{ready: make(chan struct{}), refs: 1}
	if c.builtins == nil {
		c.builtins = map[int]*builtinModule{}
	}
	c.builtins[d.index] = b
	c.builtinMu.Unlock()
	b.h, b.err = load()
	if b.err != nil {
		c.builtinMu.Lock()
		delete(c.builtins, d.index) // the next asker loads again
		c.builtinMu.Unlock()
	}
	close(b.ready)
	if b.err != nil {
		return nil, b.err
	}
	return b, nil
}

// dropBuiltin counts one holder of b less and unloads it, in d's context
// (the device's primary context, which d still holds), when it was the
// last.
func (c *Core) dropBuiltin(d *Device, b *builtinModule) error {
	c.builtinMu.Lock()
	b.refs--
	last := b.refs == 0
	if last {
		delete(c.builtins, d.index)
	}
	c.builtinMu.Unlock()
	if !last {
		return nil
	}
	return d.v.ModuleUnload(d.ctx, b.h)
}

func (m *module) resourceKind() string { return "module" }

// Function looks a kernel up by name; backend.ErrNotFound when the module
// has none of that name.
func (m *module) Function(name string) (backend.Function, error) {
	if m.closed.Load() {
		return nil, m.d.Errorf(backend.CodeClosed, "module %s is unloaded", m.name)
	}
	h, err := m.d.v.ModuleFunction(m.d.ctx, m.h, name)
	if err != nil {
		return nil, m.d.Wrap(err, "kernel %q in module %s", name, m.name)
	}
	return &function{m: m, h: h, name: name}, nil
}

// Close unloads the module.
func (m *module) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.d.res.Remove(m)
	if m.builtin != nil {
		return m.d.Wrap(m.d.c.dropBuiltin(m.d, m.builtin), "unloading module %s", m.name)
	}
	return m.d.Wrap(m.d.v.ModuleUnload(m.d.ctx, m.h), "unloading module %s", m.name)
}

// function is a kernel of a loaded module.
type function struct {
	m    *module
	h    Handle
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
			return 0, backend.Errorf(backend.CodeInvalidArgument, "kernel argument %d has size %d (want 4 or 8)", i, sz)
		}
		off = AlignUp(off, sz) + sz
	}
	return AlignUp(off, 8), nil
}

// packParams writes args into buf (of paramSize bytes) exactly as
// backend.MarshalArgs lays them out, without allocating.
func packParams(buf []byte, args []backend.Arg) {
	clear(buf)
	off := 0
	for _, a := range args {
		sz := a.Size()
		off = AlignUp(off, sz)
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
