//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/connectivity"
)

// Name is the backend's registry name.
const Name = "cuda"

func init() { gpu.Register(Name, 100, Open) }

// deviceEntry is what the backend learns about a device once, at Open.
type deviceEntry struct {
	ordinal int // CUdevice
	info    backend.DeviceInfo
	// early: launches asking for backend.LaunchConfig.Early get
	// programmatic stream serialization (compute capability 9.0 or newer,
	// cuLaunchKernelEx present, not turned off by EnvEarlyLaunch).
	early bool
}

// EnvEarlyLaunch, set to 0, turns early launches (backend.LaunchConfig.Early,
// programmatic dependent launch) off: every kernel then waits for the work
// ahead of it on its stream to finish before it starts. For comparing the
// two in `intranode bench`; the default is on where the device has it.
const EnvEarlyLaunch = "INTRANODE_CUDA_EARLY_LAUNCH"

// Backend is the CUDA backend: devices through the CUDA driver API, links and
// fabric state through NVML. It is safe for concurrent use.
//
// Beyond the backend.Backend contract it offers the accessors
// `intranode doctor` prints: DriverVersion, NVMLVersion, NCCLVersion,
// NVMLDevices, FabricState and PeerTest; and NCCL's all-reduce as the
// collective layer's fallback (FallbackAllReduce, see nccl.go).
type Backend struct {
	// Core is the device table, opened devices and peer checks shared
	// with the ROCm backend.
	gpu.Core

	log     *slog.Logger
	version int
	devices []deviceEntry

	// nvml is nil when NVML could not be initialised; nvmlErr says why.
	nvml    nvml.Interface
	nvmlErr error

	linksMu    sync.Mutex
	links      *connectivity.Matrix // LinkMatrix's first answer, kept (see LinkMatrix)
	prefetched sync.Once            // Open's background LinkMatrix read

	ctxMu sync.Mutex
	ctxs  []ctxHandle // primary contexts the backend retained for its own checks

	// nccl is NCCL: the communicators of FallbackAllReduce and of
	// NewInterHost (nccl.go).
	nccl *gpu.CCL
}

// Open returns the CUDA backend. It loads libcuda.so.1 and libnvidia-ml.so.1
// but does not fail when they are missing: Probe then says why, and every
// other method returns the same error (matching backend.ErrUnavailable).
func Open(ctx context.Context) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, backend.Errorf(backend.CodeTimeout, "cuda: open: %w", err)
	}
	b := &Backend{log: slog.Default().With("backend", Name)}
	initErr := b.initDriver()
	if initErr == nil {
		b.initNVML()
	}
	infos := make([]backend.DeviceInfo, len(b.devices))
	for i, e := range b.devices {
		infos[i] = e.info
	}
	b.ctxs = make([]ctxHandle, len(b.devices))
	b.Init(vendor{Runtime: driverRuntime(), b: b}, b.log, initErr, infos)
	b.nccl = newNCCL(b)
	return b, nil
}

func (b *Backend) initDriver() error {
	if err := loadDriver(); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	v, err := driverVersion()
	if err != nil {
		return backend.Wrap(backend.CodeUnavailable, err, "cuda: reading the driver version")
	}
	b.version = v
	n, err := deviceCount()
	if err != nil {
		return backend.Wrap(backend.CodeUnavailable, err, "cuda: counting devices")
	}
	for i := range n {
		e, err := describeDevice(i)
		if err != nil {
			return backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("cuda: device %d", i))
		}
		b.devices = append(b.devices, e)
	}
	b.log.Debug("cuda: driver loaded", "version", v, "devices", n)
	return nil
}

func describeDevice(i int) (deviceEntry, error) {
	ord, err := deviceGet(i)
	if err != nil {
		return deviceEntry{}, err
	}
	name, err := deviceName(ord)
	if err != nil {
		return deviceEntry{}, err
	}
	bus, err := devicePCIBusID(ord)
	if err != nil {
		return deviceEntry{}, err
	}
	if bus, err = NormalizeBusID(bus); err != nil {
		return deviceEntry{}, err
	}
	uuid, err := deviceUUID(ord)
	if err != nil {
		return deviceEntry{}, err
	}
	mem, err := deviceTotalMem(ord)
	if err != nil {
		return deviceEntry{}, err
	}
	major, err := deviceAttr(ord, attrComputeMajor)
	if err != nil {
		return deviceEntry{}, err
	}
	minor, err := deviceAttr(ord, attrComputeMinor)
	if err != nil {
		return deviceEntry{}, err
	}
	return deviceEntry{ordinal: ord, info: backend.DeviceInfo{
		Index:        i,
		Name:         name,
		PCIBusID:     bus,
		UUID:         formatUUID(uuid),
		MemoryBytes:  mem,
		Architecture: fmt.Sprintf("sm_%d%d", major, minor),
	}, early: major >= 9 && hasLaunchEx() && os.Getenv(EnvEarlyLaunch) != "0"}, nil
}

// formatUUID spells a device UUID as NVML and nvidia-smi do.
func formatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (b *Backend) initNVML() {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		b.nvmlErr = backend.Errorf(backend.CodeUnavailable, "cuda: NVML (libnvidia-ml.so.1) unavailable: %v", ret)
		b.log.Debug("cuda: NVML unavailable", "error", ret)
		return
	}
	b.nvml = lib
}

// Name returns "cuda".
func (b *Backend) Name() string { return Name }

// Probe returns nil when the driver loaded and sees at least one device, and
// otherwise an error matching backend.ErrUnavailable that says why.
func (b *Backend) Probe(ctx context.Context) error {
	if err := b.Usable(ctx); err != nil {
		return err
	}
	if len(b.devices) == 0 {
		return backend.Errorf(backend.CodeUnavailable, "cuda: the driver sees no device")
	}
	return nil
}

// Capabilities declares multi-process shareable memory (file descriptors,
// and fabric handles where FabricSupported says yes), graphs, host-mapped
// memory and timing events.
func (b *Backend) Capabilities() backend.Capability {
	return backend.CapMultiProcess | backend.CapHandleFD | backend.CapHandleFabric |
		backend.CapGraphs | backend.CapHostMapped | backend.CapTiming
}

// LinkMatrix counts the NVLinks between CUDA devices, read from NVML (see
// NVLinkMatrix). NVML is read once per backend, one caller at a time, and
// every later call returns a copy of that answer: a host's NVLinks do not
// change while a process runs, and ranks that share one backend (goroutines
// of one process) must judge the same topology. Read concurrently, NVML
// answered one of two ranks with a matrix that made the pair unusable
// (2×H200, docs/results/2026-11-22-h200x2-c/runN).
func (b *Backend) LinkMatrix(ctx context.Context) (connectivity.Matrix, error) {
	if err := b.Usable(ctx); err != nil {
		return connectivity.Matrix{}, err
	}
	b.linksMu.Lock()
	defer b.linksMu.Unlock()
	if b.links != nil {
		return b.links.Clone(), nil
	}
	if b.Closed() { // Close shuts NVML down holding linksMu
		return connectivity.Matrix{}, backend.Errorf(backend.CodeClosed, "cuda: backend is closed")
	}
	if b.nvml == nil {
		return connectivity.Matrix{}, b.nvmlErr
	}
	for _, sym := range []string{"nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetNvLinkRemotePciInfo_v2"} {
		if err := b.nvml.Extensions().LookupSymbol(sym); err != nil {
			return connectivity.Matrix{}, backend.Errorf(backend.CodeNotSupported, "cuda: NVML lacks %s (driver too old): %w", sym, err)
		}
	}
	m, err := NVLinkMatrix(b.nvml, b.BusIDs())
	if err != nil {
		return connectivity.Matrix{}, fmt.Errorf("cuda: link matrix: %w", err)
	}
	b.links = &m
	return m.Clone(), nil
}

// Open opens device i (gpu.Core.Open). The first Open also starts reading
// the NVLink matrix (LinkMatrix) on a goroutine of its own: a program opens
// its device before it forms a group, and NVML's answer (61–79 ms for four
// H200s, docs/PERFORMANCE.md) then comes while the driver creates the
// device's context (hundreds of ms) instead of inside Rendezvous, which
// finds it kept.
func (b *Backend) Open(ctx context.Context, i int) (backend.Device, error) {
	b.prefetched.Do(func() {
		go func() {
			if _, err := b.LinkMatrix(context.Background()); err != nil {
				b.log.Debug("cuda: reading the link matrix ahead", "error", err)
			}
		}()
	})
	return b.Core.Open(ctx, i)
}

// MulticastSupported reads CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED. It is
// reported only: the backend never creates multicast objects. Drivers too
// old to know the attribute report false.
func (b *Backend) MulticastSupported(ctx context.Context, i int) (bool, error) {
	if err := b.Usable(ctx, i); err != nil {
		return false, err
	}
	v, err := deviceAttr(b.devices[i].ordinal, attrMulticastSupported)
	if err != nil {
		var de *DriverError
		if errors.As(err, &de) && de.Result == resultInvalidValue {
			return false, nil
		}
		return false, gpu.Wrap(err, "cuda: device %d: multicast attribute", i)
	}
	return v != 0, nil
}

// context returns device i's primary context, retained once for the
// backend's own checks and released by Close.
func (b *Backend) context(i int) (ctxHandle, error) {
	b.ctxMu.Lock()
	defer b.ctxMu.Unlock()
	if b.ctxs == nil {
		return 0, backend.Errorf(backend.CodeClosed, "cuda: backend is closed")
	}
	if b.ctxs[i] != 0 {
		return b.ctxs[i], nil
	}
	c, err := ctxRetain(b.devices[i].ordinal)
	if err != nil {
		return 0, gpu.Wrap(err, "cuda: device %d: retaining the primary context", i)
	}
	b.ctxs[i] = c
	return c, nil
}

// Close aborts the NCCL communicators of FallbackAllReduce, releases the
// contexts the backend retained and shuts NVML down. Devices opened from it
// keep their own contexts until they are closed.
func (b *Backend) Close() error {
	if !b.MarkClosed() {
		return nil
	}
	b.ctxMu.Lock()
	ctxs := b.ctxs
	b.ctxs = nil
	b.ctxMu.Unlock()
	first := b.nccl.Close()
	for i, c := range ctxs {
		if c == 0 {
			continue
		}
		if err := ctxRelease(b.devices[i].ordinal); err != nil && first == nil {
			first = gpu.Wrap(err, "cuda: device %d: releasing the primary context", i)
		}
	}
	if b.nvml != nil {
		// linksMu: a LinkMatrix read in progress (Open's, on its own
		// goroutine) ends before NVML does.
		b.linksMu.Lock()
		ret := b.nvml.Shutdown()
		b.linksMu.Unlock()
		if ret != nvml.SUCCESS && first == nil {
			first = backend.Errorf(backend.CodeInternal, "cuda: NVML shutdown: %v", ret)
		}
	}
	return first
}

var _ backend.Backend = (*Backend)(nil)
