package fake

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// Name is the registry name of the fake backend.
const Name = "fake"

func init() {
	backend.Register(backend.Driver{Name: Name, Priority: 0, Open: openDriver})
}

// openDriver is the registered constructor: the environment (EnvDevices,
// EnvTopology, EnvBrokenP2P) and the "fake:key=value,…" argument configure it.
func openDriver(_ context.Context, arg string) (backend.Backend, error) {
	opts, err := EnvOptions(arg)
	if err != nil {
		return nil, err
	}
	return New(opts...)
}

// Backend is the fake backend: DeviceCount devices backed by this host's
// memory, linked as a topology preset says.
type Backend struct {
	cfg    config
	devs   []*deviceState
	matrix connectivity.Matrix
	peers  *connectivity.PeerCache
	closed atomic.Bool
	log    *slog.Logger
}

// deviceState is what every handle on one device shares.
type deviceState struct {
	b       *Backend
	index   int
	info    backend.DeviceInfo
	limit   uint64
	used    atomic.Int64
	streams atomic.Int64 // numbers streams for messages

	fabricMu sync.Mutex
	fabric   connectivity.Access
}

var _ backend.Backend = (*Backend)(nil)

// New returns a fake backend. It fails with backend.ErrUnavailable where the
// fake cannot work (no memfd_create) and with backend.ErrInvalidArgument for
// bad options.
func New(opts ...Option) (*Backend, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := probeMemfd(); err != nil {
		return nil, err
	}
	m, err := cfg.preset.Matrix(cfg.devices)
	if err != nil {
		return nil, err
	}
	for p := range cfg.broken {
		if p[0] < 0 || p[0] >= cfg.devices || p[1] < 0 || p[1] >= cfg.devices {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: broken peer pair %d>%d: devices are 0 to %d", p[0], p[1], cfg.devices-1)
		}
	}
	b := &Backend{cfg: cfg, matrix: m, log: cfg.logger}
	b.peers = connectivity.NewPeerCache(cfg.devices, func(i, j int) (bool, error) {
		return b.peerDetail(i, j).Verified, nil
	}, nil)
	for i := range cfg.devices {
		b.devs = append(b.devs, &deviceState{
			b:     b,
			index: i,
			limit: cfg.limit,
			info: backend.DeviceInfo{
				Index:        i,
				Name:         "intranode fake device",
				PCIBusID:     fmt.Sprintf("0000:%02x:00.0", i),
				UUID:         fmt.Sprintf("FAKE-00000000-0000-0000-0000-%012d", i),
				MemoryBytes:  cfg.limit,
				Architecture: "fake",
			},
		})
	}
	b.log.Debug("fake: backend created", "devices", cfg.devices, "topology", string(cfg.preset), "fabric", cfg.fabric,
		"broken_p2p", len(cfg.broken))
	return b, nil
}

// Name returns "fake".
func (b *Backend) Name() string { return Name }

// Probe checks that memfd_create works; otherwise the error matches
// backend.ErrUnavailable and says why.
func (b *Backend) Probe(context.Context) error {
	if b.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "fake: backend is closed")
	}
	return probeMemfd()
}

// Capabilities declares multi-process sharing through descriptors, graphs,
// host-mapped memory, timing and overlapping ranks on one device, plus
// fabric handles when WithFabric(true) was given.
func (b *Backend) Capabilities() backend.Capability {
	c := backend.CapMultiProcess | backend.CapHandleFD | backend.CapGraphs |
		backend.CapHostMapped | backend.CapTiming | backend.CapOverlapDevices
	if b.cfg.fabric {
		c |= backend.CapHandleFabric
	}
	return c
}

// Topology is the preset the backend was built with.
func (b *Backend) Topology() Preset { return b.cfg.preset }

// DeviceCount is the number of devices.
func (b *Backend) DeviceCount(context.Context) (int, error) {
	if b.closed.Load() {
		return 0, backend.Errorf(backend.CodeClosed, "fake: backend is closed")
	}
	return len(b.devs), nil
}

func (b *Backend) device(i int) (*deviceState, error) {
	if b.closed.Load() {
		return nil, backend.Errorf(backend.CodeClosed, "fake: backend is closed")
	}
	if i < 0 || i >= len(b.devs) {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: device %d out of range [0,%d)", i, len(b.devs))
	}
	return b.devs[i], nil
}

// DeviceInfo describes device i.
func (b *Backend) DeviceInfo(_ context.Context, i int) (backend.DeviceInfo, error) {
	st, err := b.device(i)
	if err != nil {
		return backend.DeviceInfo{}, err
	}
	return st.info, nil
}

// LinkMatrix returns a copy of the preset's matrix.
func (b *Backend) LinkMatrix(context.Context) (connectivity.Matrix, error) {
	if b.closed.Load() {
		return connectivity.Matrix{}, backend.Errorf(backend.CodeClosed, "fake: backend is closed")
	}
	return b.matrix.Clone(), nil
}

// PeerAccess is true when i and j are linked and the pair is not broken
// (WithBrokenP2P, EnvBrokenP2P); always for i == j. PeerTest says why not.
func (b *Backend) PeerAccess(_ context.Context, i, j int) (bool, error) {
	if _, err := b.device(i); err != nil {
		return false, err
	}
	if _, err := b.device(j); err != nil {
		return false, err
	}
	ok, err := b.peers.Get(i, j)
	if err != nil {
		return false, backend.Wrap(backend.CodeInternal, err, "fake: peer access")
	}
	return ok, nil
}

// PeerCache exposes the peer-access cache (for rendering its state).
func (b *Backend) PeerCache() *connectivity.PeerCache { return b.peers }

// FabricSupported is false unless WithFabric(true) was given; then it is
// the result, cached, of a real allocate → export → import → read-back
// round trip on device i.
func (b *Backend) FabricSupported(ctx context.Context, i int) (bool, error) {
	st, err := b.device(i)
	if err != nil {
		return false, err
	}
	if !b.cfg.fabric {
		return false, nil
	}
	st.fabricMu.Lock()
	defer st.fabricMu.Unlock()
	if st.fabric == connectivity.AccessUnknown {
		err := b.fabricRoundTrip(ctx, st)
		if err != nil {
			b.log.Debug("fake: fabric round trip failed", "device", i, "err", err)
			st.fabric = connectivity.AccessNo
		} else {
			st.fabric = connectivity.AccessYes
		}
	}
	return st.fabric == connectivity.AccessYes, nil
}

func (b *Backend) fabricRoundTrip(ctx context.Context, st *deviceState) (err error) {
	d := newDevice(b, st)
	defer func() {
		if cerr := d.Close(); err == nil {
			err = cerr
		}
	}()
	a, err := d.AllocShareable(ctx, 1, backend.HandleFabric)
	if err != nil {
		return err
	}
	defer a.Close()
	h, err := a.Export(backend.HandleFabric)
	if err != nil {
		return err
	}
	imp, err := d.Import(ctx, h)
	if err != nil {
		return err
	}
	defer imp.Close()
	const probe = 0x5a
	if err := d.Memset(ctx, a.Ptr(), probe, 1); err != nil {
		return err
	}
	got := make([]byte, 1)
	if err := d.CopyFromDevice(ctx, got, imp.Ptr()); err != nil {
		return err
	}
	if got[0] != probe {
		return backend.Errorf(backend.CodeInternal, "fake: fabric import does not alias the exported memory")
	}
	return nil
}

// MulticastSupported is always false: intranode never uses multicast and
// the fake does not pretend to have it.
func (b *Backend) MulticastSupported(_ context.Context, i int) (bool, error) {
	if _, err := b.device(i); err != nil {
		return false, err
	}
	return false, nil
}

// Open returns a new handle on device i.
func (b *Backend) Open(_ context.Context, i int) (backend.Device, error) {
	st, err := b.device(i)
	if err != nil {
		return nil, err
	}
	b.log.Debug("fake: open", "device", i)
	return newDevice(b, st), nil
}

// Close marks the backend closed: Open and the queries fail afterwards.
// Devices already open keep working until they are closed.
func (b *Backend) Close() error {
	b.closed.Store(true)
	return nil
}
