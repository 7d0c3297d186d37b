package fake

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/intranode/intranode/backend"
)

// module is a loaded module of Go kernels.
type module struct {
	dev     *device
	name    string
	kernels map[string]Kernel
	closed  atomic.Bool
	// unloaded ends when the module is closed; kernels of it still
	// running see their context end (as a GPU kernel ends when its
	// communicator is aborted), instead of waiting out their deadline.
	unloaded context.Context
	unload   context.CancelFunc
}

// function is one kernel of a module.
type function struct {
	mod    *module
	name   string
	kernel Kernel
}

// Function looks a kernel up.
func (m *module) Function(name string) (backend.Function, error) {
	if m.closed.Load() {
		return nil, backend.Errorf(backend.CodeClosed, "fake: module %q is closed", m.name)
	}
	k, ok := m.kernels[name]
	if !ok {
		names := slices.Sorted(maps.Keys(m.kernels))
		return nil, backend.Errorf(backend.CodeNotFound, "fake: module %q has no kernel %q (has %s)", m.name, name, strings.Join(names, ", "))
	}
	return &function{mod: m, name: name, kernel: k}, nil
}

// Close unloads the module; launches of its functions fail afterwards.
func (m *module) Close() error {
	if m.closed.CompareAndSwap(false, true) {
		m.unload()
		m.dev.forget(m)
	}
	return nil
}

// Name is the kernel name.
func (f *function) Name() string { return f.name }
