package fake

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"

	"github.com/intranode/intranode/backend"
)

// Environment variables read by the registered "fake" driver (backend.Open),
// not by New.
const (
	// EnvDevices sets the number of fake devices, a decimal integer in
	// [1, MaxDevices] (default DefaultDevices).
	EnvDevices = "INTRANODE_FAKE_DEVICES"
	// EnvTopology names the link preset (see ParsePreset; default "full").
	EnvTopology = "INTRANODE_FAKE_TOPOLOGY"
	// EnvBrokenP2P lists device pairs whose peer-access test fails although
	// the link matrix shows their links: "0-1,2-3" breaks both directions
	// of each pair, "0>1" only device 0's access to device 1 (see
	// ParseBrokenP2P and WithBrokenP2P). Default: none.
	EnvBrokenP2P = "INTRANODE_FAKE_BROKEN_P2P"
)

// Defaults and limits of New.
const (
	// DefaultDevices is the number of devices when WithDevices is not given:
	// a full group of kMaxDevices.
	DefaultDevices = 8
	// MaxDevices bounds WithDevices: PCI bus ids are "0000:%02x:00.0".
	MaxDevices = 256
	// DefaultMemoryLimit is each device's reported and enforced capacity.
	DefaultMemoryLimit = 16 << 30
)

// Option configures New.
type Option func(*config) error

type config struct {
	devices int
	preset  Preset
	limit   uint64
	fabric  bool
	logger  *slog.Logger
	// broken holds the ordered pairs whose peer-access test fails;
	// brokenBy names what broke them, for PeerTest's reason.
	broken   map[[2]int]bool
	brokenBy string
	// kernels replaces kernels of registered modules, by module name.
	kernels map[string]map[string]Kernel
}

func defaultConfig() config {
	return config{
		devices: DefaultDevices,
		preset:  PresetFull,
		limit:   DefaultMemoryLimit,
		logger:  slog.New(slog.DiscardHandler),
	}
}

// WithDevices sets the number of devices, in [1, MaxDevices].
func WithDevices(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxDevices {
			return backend.Errorf(backend.CodeInvalidArgument, "fake: %d devices: want 1 to %d", n, MaxDevices)
		}
		c.devices = n
		return nil
	}
}

// WithTopology sets how the devices are linked (default PresetFull).
func WithTopology(p Preset) Option {
	return func(c *config) error {
		if _, err := ParsePreset(string(p)); err != nil {
			return err
		}
		c.preset = p
		return nil
	}
}

// WithMemoryLimit sets each device's capacity in bytes: DeviceInfo reports
// it and device allocations (plain and shareable, rounded to pages) beyond it
// fail with backend.ErrOutOfMemory. Pages are only touched when used, so a
// large limit costs nothing.
func WithMemoryLimit(bytes uint64) Option {
	return func(c *config) error {
		if bytes == 0 {
			return backend.Errorf(backend.CodeInvalidArgument, "fake: memory limit must be positive")
		}
		c.limit = bytes
		return nil
	}
}

// WithFabric makes the devices support fabric handles (CapHandleFabric):
// an exported fabric handle names the exporter's memfd through
// /proc/<pid>/fd, so any process of the same user on the host can import
// it while the allocation lives. Default false.
func WithFabric(on bool) Option {
	return func(c *config) error {
		c.fabric = on
		return nil
	}
}

// WithKernels replaces, on this backend's devices only, the named kernels
// of the registered module: LoadModule of module serves these in place of
// the registered ones, and the registered ones for every other name. It
// lets a test put a faulty kernel under code that must catch it (the
// bench's check, the suite); module need not be registered yet.
func WithKernels(module string, kernels map[string]Kernel) Option {
	return func(c *config) error {
		if module == "" {
			return backend.Errorf(backend.CodeInvalidArgument, "fake: WithKernels with an empty module name")
		}
		for name, k := range kernels {
			if k == nil {
				return backend.Errorf(backend.CodeInvalidArgument, "fake: WithKernels(%q): kernel %q is nil", module, name)
			}
		}
		if c.kernels == nil {
			c.kernels = map[string]map[string]Kernel{}
		}
		c.kernels[module] = maps.Clone(kernels)
		return nil
	}
}

// WithBrokenP2P makes the peer-access test fail for each ordered pair
// {from, to}, as on a machine where writes through the peer mapping do not
// land: PeerAccess(from, to) is false and PeerTest says why, while the link
// matrix still shows the pair's links. Break both directions of a pair by
// listing both. Devices must be distinct and in range (checked by New).
// Rendezvous refuses groups that would use a broken pair, which is what
// this option is for.
func WithBrokenP2P(pairs ...[2]int) Option {
	return withBrokenP2P("fake.WithBrokenP2P", pairs)
}

func withBrokenP2P(by string, pairs [][2]int) Option {
	return func(c *config) error {
		if c.broken == nil {
			c.broken = map[[2]int]bool{}
		}
		for _, p := range pairs {
			if p[0] == p[1] {
				return backend.Errorf(backend.CodeInvalidArgument, "fake: broken peer pair %d>%d: a device always reaches its own memory", p[0], p[1])
			}
			c.broken[p] = true
		}
		c.brokenBy = by
		return nil
	}
}

// WithLogger sets where the backend logs (debug level only). The default
// discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return backend.Errorf(backend.CodeInvalidArgument, "fake: nil logger")
		}
		c.logger = l
		return nil
	}
}

// EnvOptions returns the options the registered driver uses: EnvDevices,
// EnvTopology and EnvBrokenP2P from the environment, then arg, the part after "fake:" in the
// name given to backend.Open, a comma-separated list of key=value settings
// that override the environment (devices=4, topology=ring, fabric=true,
// memory=1073741824, brokenp2p=0-1). Errors match backend.ErrInvalidArgument and name the
// offending variable or key.
func EnvOptions(arg string) ([]Option, error) {
	return envOptions(os.LookupEnv, arg)
}

func envOptions(lookup func(string) (string, bool), arg string) ([]Option, error) {
	var opts []Option
	if v, ok := lookup(EnvDevices); ok && v != "" {
		n, err := parseDevices(v)
		if err != nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: %s=%q: %w", EnvDevices, v, err)
		}
		opts = append(opts, WithDevices(n))
	}
	if v, ok := lookup(EnvTopology); ok && v != "" {
		p, err := ParsePreset(v)
		if err != nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: %s=%q: %w", EnvTopology, v, err)
		}
		opts = append(opts, WithTopology(p))
	}
	if v, ok := lookup(EnvBrokenP2P); ok && v != "" {
		pairs, err := ParseBrokenP2P(v)
		if err != nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: %s=%q: %w", EnvBrokenP2P, v, err)
		}
		opts = append(opts, withBrokenP2P(EnvBrokenP2P, pairs))
	}
	if arg == "" {
		return opts, nil
	}
	for _, kv := range strings.Split(arg, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: setting %q: want key=value (devices, topology, fabric, memory, brokenp2p)", kv)
		}
		opt, err := parseSetting(key, val)
		if err != nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: setting %s=%q: %w", key, val, err)
		}
		opts = append(opts, opt)
	}
	return opts, nil
}

func parseSetting(key, val string) (Option, error) {
	switch key {
	case "devices":
		n, err := parseDevices(val)
		if err != nil {
			return nil, err
		}
		return WithDevices(n), nil
	case "topology":
		p, err := ParsePreset(val)
		if err != nil {
			return nil, err
		}
		return WithTopology(p), nil
	case "fabric":
		on, err := strconv.ParseBool(val)
		if err != nil {
			return nil, fmt.Errorf("not a boolean")
		}
		return WithFabric(on), nil
	case "brokenp2p":
		pairs, err := ParseBrokenP2P(val)
		if err != nil {
			return nil, err
		}
		return withBrokenP2P("brokenp2p", pairs), nil
	case "memory":
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("not a positive number of bytes")
		}
		return WithMemoryLimit(n), nil
	}
	return nil, fmt.Errorf("unknown key (want devices, topology, fabric, memory or brokenp2p)")
}

func parseDevices(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("not an integer")
	}
	if n < 1 || n > MaxDevices {
		return 0, fmt.Errorf("%d devices: want 1 to %d", n, MaxDevices)
	}
	return n, nil
}
