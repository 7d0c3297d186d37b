package fake

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/intranode/intranode/backend"
)

// Kernel is a fake device kernel: a Go function run on a stream's goroutine.
// ctx is cancelled when the stream is closed, so a kernel that spins (waiting
// for a peer's signal, say) must watch it as well as its own deadline. A
// non-nil error becomes the stream's sticky error.
type Kernel func(ctx context.Context, l *Launch) error

// Launch is what a Kernel receives: the memory it may touch, the launch
// shape, the arguments as the caller passed them and the device it runs on.
type Launch struct {
	// Mem resolves device pointers (this process's view of every live fake
	// allocation, on any device).
	Mem Memory
	// Config is the grid and block the caller asked for.
	Config backend.LaunchConfig
	// Args are the launch arguments, in order.
	Args []backend.Arg
	// Device is the index of the device the stream belongs to.
	Device int
}

// Memory resolves device pointers to host-addressable bytes.
type Memory interface {
	// Bytes returns n bytes at p, aliasing the allocation (writes are seen by
	// every mapping of it, in this process and others). It fails with an
	// error matching backend.ErrInvalidArgument when [p, p+n) is not inside
	// one live allocation.
	Bytes(p backend.DevicePtr, n int) ([]byte, error)
}

// The module registry is, like backend's driver registry, written from init
// functions of kernel packages and read afterwards.
var (
	modulesMu sync.RWMutex
	modules   = map[string]map[string]Kernel{}
)

// RegisterModule makes a module of Go kernels loadable by name through
// Device.LoadModule(ModuleSource{Name: name}). It is meant to be called from
// init (package kernels/cpu registers kernels.ModuleName) and panics if name
// is empty, a kernel is nil, or the name is already registered.
func RegisterModule(name string, kernels map[string]Kernel) {
	if name == "" {
		panic("fake: RegisterModule with an empty name")
	}
	for k, fn := range kernels {
		if fn == nil {
			panic(fmt.Sprintf("fake: RegisterModule(%q): kernel %q is nil", name, k))
		}
	}
	modulesMu.Lock()
	defer modulesMu.Unlock()
	if _, dup := modules[name]; dup {
		panic("fake: RegisterModule called twice for module " + name)
	}
	modules[name] = maps.Clone(kernels)
}

// Modules lists the registered module names, sorted.
func Modules() []string {
	modulesMu.RLock()
	defer modulesMu.RUnlock()
	return slices.Sorted(maps.Keys(modules))
}

// lookupModule returns the kernels registered under name.
func lookupModule(name string) (map[string]Kernel, error) {
	modulesMu.RLock()
	k, ok := modules[name]
	modulesMu.RUnlock()
	if !ok {
		known := Modules()
		list := "none"
		if len(known) > 0 {
			list = strings.Join(known, ", ")
		}
		return nil, backend.Errorf(backend.CodeNotFound,
			"fake: module %q is not registered (known modules: %s; blank-import the package that registers it, e.g. kernels/cpu)", name, list)
	}
	return k, nil
}
