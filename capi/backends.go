package capi

import (
	"context"
	"sync"

	"github.com/intranode/intranode/backend"
)

// backends is the registry of the backends this process's comms use, one
// instance per name, opened at first use and kept for the life of the
// process. Every comm of the process shares it: the vendor libraries under
// a backend (NVML, the CUDA driver) are process-wide, and instances opened
// and closed by ranks that are threads of one process would shut them down
// under each other (two threads' NVML queries returned empty PCI bus ids
// while a third closed its instance).
var backends = struct {
	sync.Mutex
	m map[string]backend.Backend
}{m: map[string]backend.Backend{}}

// Backend returns the process's shared instance of the backend name ("" is
// "auto"), opening it the first time. Callers must not close it.
func Backend(ctx context.Context, name string) (backend.Backend, error) {
	if name == "" {
		name = "auto"
	}
	backends.Lock()
	defer backends.Unlock()
	if b := backends.m[name]; b != nil {
		return b, nil
	}
	b, err := backend.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	backends.m[name] = b
	return b, nil
}
