package backend

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Driver is a registered backend implementation.
type Driver struct {
	// Name is what users pass to Open ("fake", "cuda", "rocm", "plugin").
	Name string
	// Priority orders the candidates of Open("auto"): higher first. Real
	// hardware backends use 100, the fake 0.
	Priority int
	// Open creates the backend. arg is what follows "name:" in the string
	// given to Open (a plugin's path, say), empty otherwise.
	Open func(ctx context.Context, arg string) (Backend, error)
}

// The registry is the only package-level mutable state: written from init
// functions, read afterwards.
var (
	registryMu sync.RWMutex
	registry   = map[string]Driver{}
)

// Register makes a driver available to Open. It is meant to be called from a
// backend package's init function and panics if the name is empty, Open is
// nil, or the name is already registered.
func Register(d Driver) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if d.Name == "" || d.Open == nil || strings.ContainsRune(d.Name, ':') {
		panic(fmt.Sprintf("backend: invalid driver registration %q", d.Name))
	}
	if _, dup := registry[d.Name]; dup {
		panic("backend: Register called twice for driver " + d.Name)
	}
	registry[d.Name] = d
}

// Drivers lists the registered driver names, highest priority first.
func Drivers() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	ds := make([]Driver, 0, len(registry))
	for _, d := range registry {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(a, b int) bool {
		if ds[a].Priority != ds[b].Priority {
			return ds[a].Priority > ds[b].Priority
		}
		return ds[a].Name < ds[b].Name
	})
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
	}
	return names
}

// Open returns the backend registered under name. "auto" (or "") tries every
// driver by priority and returns the first whose Probe succeeds. A name of
// the form "driver:arg" passes arg to the driver (as in "plugin:/path").
func Open(ctx context.Context, name string) (Backend, error) {
	if name == "" || name == "auto" {
		return openAuto(ctx)
	}
	driver, arg, _ := strings.Cut(name, ":")
	registryMu.RLock()
	d, ok := registry[driver]
	registryMu.RUnlock()
	if !ok {
		return nil, Errorf(CodeNotFound, "backend %q is not registered (have %s; cuda and rocm need the build tags of the same name)",
			driver, strings.Join(Drivers(), ", "))
	}
	b, err := d.Open(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", driver, err)
	}
	return b, nil
}

func openAuto(ctx context.Context) (Backend, error) {
	var reasons []error
	for _, name := range Drivers() {
		if name == "plugin" {
			continue // needs a path; never picked automatically
		}
		b, err := Open(ctx, name)
		if err != nil {
			reasons = append(reasons, err)
			continue
		}
		if err := b.Probe(ctx); err != nil {
			_ = b.Close()
			reasons = append(reasons, fmt.Errorf("backend %s: %w", name, err))
			continue
		}
		return b, nil
	}
	return nil, &Error{Code: CodeUnavailable, Msg: "no usable backend", Err: errors.Join(reasons...)}
}
