//go:build rocm

package rocm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/connectivity"
)

// Name is the backend's registry name.
const Name = "rocm"

// EnvHandles names the environment variable that forces how shareable
// memory crosses processes: "fd" (virtual memory management, POSIX file
// descriptors) or "ipc" (HIP IPC memory handles). Unset, the backend uses
// descriptors where the runtime can make them for uncached memory and IPC
// handles otherwise.
const EnvHandles = "INTRANODE_ROCM_HANDLES"

func init() { gpu.Register(Name, 90, Open) }

// deviceEntry is what the backend learns about a device once, at Open.
type deviceEntry struct {
	info backend.DeviceInfo
	// warpSize is the wavefront size (64 on CDNA GPUs).
	warpSize int
	// wallClockKHz is the rate of the clock the kernels' deadlines read
	// (wall_clock64); 0 when the runtime cannot say (ROCm 5).
	wallClockKHz int
	// vmmUncached says the device can make uncached memory that exports
	// as a file descriptor.
	vmmUncached bool
}

// sharing is how the backend's shareable allocations cross processes.
type sharing struct {
	// kind is backend.HandleFD (virtual memory management) or
	// backend.HandleFabric (IPC memory handles, carried as opaque bytes).
	kind backend.HandleKind
	// vmmType is the memory type of descriptor-shared allocations.
	vmmType memoryType
	// why says how the choice was made, for doctor.
	why string
}

// String names the mode for doctor and logs.
func (s sharing) String() string {
	if s.kind == backend.HandleFD {
		return fmt.Sprintf("file descriptors (hipMemCreate, %s memory): %s", s.vmmType, s.why)
	}
	return "IPC memory handles (hipExtMallocWithFlags, hipIpcGetMemHandle): " + s.why
}

// Backend is the ROCm backend: devices through the HIP runtime, links
// through amdsmi or rocm-smi. It is safe for concurrent use.
//
// Beyond the backend.Backend contract it offers the accessors `intranode
// doctor` prints: RuntimeVersion, SMILibrary, Links, Sharing, PeerTest and
// the Diagnostics.
type Backend struct {
	// Core is the device table, opened devices and peer checks shared
	// with the CUDA backend.
	gpu.Core

	log *slog.Logger

	// hip is nil when the runtime library could not be loaded.
	hip            hipRuntime
	runtimeVersion int
	driverVersion  int
	devices        []deviceEntry

	// smi is nil when no system management library could be started;
	// smiErr says why.
	smi    SMI
	smiErr error

	share sharing

	mu    sync.Mutex
	links []PairLink
	// ipcType is the memory type IPC-shared allocations use: uncached,
	// or fine-grained once the runtime refused the uncached flag.
	ipcType memoryType

	// rccl is RCCL: the communicators of NewInterHost (rccl.go).
	rccl *gpu.CCL
}

// Open returns the ROCm backend. It loads libamdhip64.so and amdsmi (or
// rocm-smi) but does not fail when they are missing or see no GPU: Probe
// then says why, and every other method returns the same error (matching
// backend.ErrUnavailable).
func Open(ctx context.Context) (*Backend, error) {
	return openWith(ctx, loadHIP, openSMI, kfdTopology)
}

// openWith is Open with the runtime, the SMI library and the KFD topology
// root supplied (the tests pass fakes).
func openWith(ctx context.Context, loadRuntime func() (hipRuntime, error), loadSMI func() (SMI, error), kfdRoot string) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, backend.Errorf(backend.CodeTimeout, "rocm: open: %w", err)
	}
	b := &Backend{log: slog.Default().With("backend", Name), ipcType: memUncached}
	initErr := b.initRuntime(loadRuntime, kfdRoot)
	if initErr == nil && len(b.devices) > 0 {
		b.smi, b.smiErr = loadSMI()
		if b.smiErr != nil {
			b.smiErr = fmt.Errorf("rocm: %w", b.smiErr)
			b.log.Debug("rocm: no SMI library", "error", b.smiErr)
		}
		b.share = b.chooseSharing()
		b.log.Debug("rocm: shareable memory", "mode", b.share.String())
	}
	infos := make([]backend.DeviceInfo, len(b.devices))
	for i, e := range b.devices {
		infos[i] = e.info
	}
	b.Init(vendor{hipRuntime: b.hip, b: b}, b.log, initErr, infos)
	b.rccl = newRCCL(b)
	return b, nil
}

// runtimeString spells a HIP version number (major*10000000 +
// minor*100000 + patch) as "6.2.41133".
func runtimeString(v int) string {
	return fmt.Sprintf("%d.%d.%d", v/10000000, v/100000%100, v%100000)
}

func (b *Backend) initRuntime(loadRuntime func() (hipRuntime, error), kfdRoot string) error {
	rt, err := loadRuntime()
	if err != nil {
		return fmt.Errorf("rocm: %w", err)
	}
	b.hip = rt
	b.runtimeVersion, b.driverVersion, _ = rt.Version()
	lib := fmt.Sprintf("%s (HIP %s)", rt.Library(), runtimeString(b.runtimeVersion))
	if err := rt.Init(); err != nil {
		if isHIP(err, hipErrorNoDevice) || isHIP(err, hipErrorInvalidDevice) {
			return backend.Errorf(backend.CodeUnavailable, "rocm: no AMD GPU: the HIP runtime %s found no device (%w)", lib, err)
		}
		return backend.Wrap(backend.CodeUnavailable, err, "rocm: the HIP runtime "+lib+" cannot be initialised")
	}
	n, err := rt.DeviceCount()
	if isHIP(err, hipErrorNoDevice) {
		n, err = 0, nil
	}
	if err != nil {
		return backend.Wrap(backend.CodeUnavailable, err, "rocm: counting devices with "+lib)
	}
	archs, err := kfdArchitectures(kfdRoot)
	if err != nil {
		b.log.Debug("rocm: no architectures from the kernel driver", "error", err)
	}
	for i := range n {
		e, err := describeDevice(rt, i, archs)
		if err != nil {
			return backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("rocm: device %d", i))
		}
		b.devices = append(b.devices, e)
	}
	b.log.Debug("rocm: runtime loaded", "library", rt.Library(), "version", runtimeString(b.runtimeVersion), "devices", n)
	return nil
}

// describeDevice reads what DeviceInfo reports, attribute by attribute.
func describeDevice(rt hipRuntime, i int, archs map[string]string) (deviceEntry, error) {
	name, err := rt.DeviceName(i)
	if err != nil {
		return deviceEntry{}, err
	}
	bus, err := rt.DevicePCIBusID(i)
	if err != nil {
		return deviceEntry{}, err
	}
	if bus, err = NormalizeBusID(bus); err != nil {
		return deviceEntry{}, err
	}
	mem, err := rt.DeviceTotalMem(i)
	if err != nil {
		return deviceEntry{}, err
	}
	uuid, hasUUID, err := rt.DeviceUUID(i)
	if err != nil {
		return deviceEntry{}, err
	}
	warp, err := rt.DeviceAttribute(i, attrWarpSize)
	if err != nil {
		return deviceEntry{}, err
	}
	arch, ok := archs[bus]
	if !ok {
		major, err := rt.DeviceAttribute(i, attrComputeMajor)
		if err != nil {
			return deviceEntry{}, err
		}
		minor, err := rt.DeviceAttribute(i, attrComputeMinor)
		if err != nil {
			return deviceEntry{}, err
		}
		// Without the kernel driver's topology only the major and minor
		// version are known; the stepping (gfx90a's "a") is not.
		arch = fmt.Sprintf("gfx%d%x?", major, minor)
	}
	// ROCm 5 does not know this attribute: 0 means unknown.
	wall, _ := rt.DeviceAttribute(i, attrWallClockRateKHz)
	e := deviceEntry{warpSize: warp, wallClockKHz: wall, info: backend.DeviceInfo{
		Index:        i,
		Name:         name,
		PCIBusID:     bus,
		MemoryBytes:  mem,
		Architecture: arch,
	}}
	if hasUUID {
		e.info.UUID = formatUUID(uuid)
	}
	return e, nil
}

// formatUUID spells a HIP device UUID as rocminfo does: the runtime fills
// it with the ASCII of the GPU's unique id ("GPU-" + those 16 characters);
// other bytes are spelt in hex.
func formatUUID(u [16]byte) string {
	printable := true
	for _, c := range u {
		if c < 0x21 || c > 0x7e {
			printable = false
		}
	}
	if printable {
		return "GPU-" + string(u[:])
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// chooseSharing decides how shareable memory crosses processes (see
// EnvHandles), after probing every device for uncached memory that exports
// as a file descriptor.
func (b *Backend) chooseSharing() sharing {
	vmmAll, coarseAll := b.hip.HasVMM(), b.hip.HasVMM()
	for i := range b.devices {
		if !b.hip.HasVMM() {
			break
		}
		on, err := b.hip.DeviceAttribute(i, attrVirtualMemory)
		if err != nil || on == 0 {
			vmmAll, coarseAll = false, false
			break
		}
		_, errU := b.hip.VMMGranularity(i, memUncached)
		b.devices[i].vmmUncached = errU == nil
		vmmAll = vmmAll && errU == nil
	}
	ipc := sharing{kind: backend.HandleFabric}
	switch os.Getenv(EnvHandles) {
	case "ipc":
		ipc.why = EnvHandles + "=ipc"
		return ipc
	case "fd":
		switch {
		case vmmAll:
			return sharing{kind: backend.HandleFD, vmmType: memUncached, why: EnvHandles + "=fd"}
		case coarseAll:
			b.log.Warn("rocm: " + EnvHandles + "=fd on a runtime without uncached virtual memory: signal pads are coarse-grained and kernels may miss peers' signals")
			return sharing{kind: backend.HandleFD, vmmType: memCoarse, why: EnvHandles + "=fd, coarse-grained (the runtime has no hipMemAllocationTypeUncached)"}
		}
		ipc.why = EnvHandles + "=fd, but the runtime has no virtual memory management"
		return ipc
	}
	switch {
	case vmmAll:
		return sharing{kind: backend.HandleFD, vmmType: memUncached, why: "the runtime makes uncached memory with hipMemCreate"}
	case b.hip.HasVMM():
		ipc.why = "hipMemCreate cannot make uncached memory on this runtime, and signal pads need it"
	default:
		ipc.why = fmt.Sprintf("HIP %s has no virtual memory management API intranode can use (ROCm 6 or newer)", runtimeString(b.runtimeVersion))
	}
	return ipc
}

// Name returns "rocm".
func (b *Backend) Name() string { return Name }

// Probe returns nil when the HIP runtime loaded and sees at least one
// device, and otherwise an error matching backend.ErrUnavailable that says
// why in one line.
func (b *Backend) Probe(ctx context.Context) error {
	if err := b.Usable(ctx); err != nil {
		return err
	}
	if len(b.devices) == 0 {
		return backend.Errorf(backend.CodeUnavailable, "rocm: no AMD GPU: the HIP runtime %s (HIP %s) sees no device",
			b.hip.Library(), runtimeString(b.runtimeVersion))
	}
	return nil
}

// Capabilities declares multi-process shareable memory, graphs, host-mapped
// memory and timing events. Shareable memory travels one way per machine
// (see Sharing): as file descriptors (CapHandleFD) where the runtime makes
// uncached memory with hipMemCreate, and otherwise as IPC memory handles,
// 64 opaque bytes that go through a store like fabric handles do
// (CapHandleFabric).
func (b *Backend) Capabilities() backend.Capability {
	caps := backend.CapMultiProcess | backend.CapGraphs | backend.CapHostMapped | backend.CapTiming
	if b.share.kind == backend.HandleFD {
		return caps | backend.CapHandleFD
	}
	return caps | backend.CapHandleFabric
}

// Sharing says how shareable memory crosses processes and why.
func (b *Backend) Sharing(ctx context.Context) (string, error) {
	if err := b.Probe(ctx); err != nil {
		return "", err
	}
	return b.share.String(), nil
}

// RuntimeVersion reports the HIP runtime's library and version.
func (b *Backend) RuntimeVersion(ctx context.Context) (string, error) {
	if err := b.Usable(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, HIP %s, driver %s", b.hip.Library(), runtimeString(b.runtimeVersion), runtimeString(b.driverVersion)), nil
}

// SMILibrary names the system management library the link matrix comes
// from ("amdsmi" or "rocm-smi"), or says why there is none.
func (b *Backend) SMILibrary(ctx context.Context) (string, error) {
	if err := b.Probe(ctx); err != nil {
		return "", err
	}
	if b.smi == nil {
		return "", b.smiErr
	}
	return b.smi.Library(), nil
}

// LinkMatrix counts the XGMI links between HIP devices as amdsmi or
// rocm-smi report them (see XGMIMatrix).
func (b *Backend) LinkMatrix(ctx context.Context) (connectivity.Matrix, error) {
	if err := b.Probe(ctx); err != nil {
		return connectivity.Matrix{}, err
	}
	if b.smi == nil {
		return connectivity.Matrix{}, b.smiErr
	}
	m, pairs, err := XGMIMatrix(b.smi, b.BusIDs())
	if err != nil {
		return connectivity.Matrix{}, gpu.Wrap(err, "rocm: link matrix from %s", b.smi.Library())
	}
	b.mu.Lock()
	b.links = pairs
	b.mu.Unlock()
	return m, nil
}

// Links returns what the SMI library said about every ordered pair of
// devices (P2P, link type, hops), reading the link matrix first if it has
// not been read.
func (b *Backend) Links(ctx context.Context) ([]PairLink, error) {
	b.mu.Lock()
	pairs := slices.Clone(b.links)
	b.mu.Unlock()
	if pairs != nil {
		return pairs, nil
	}
	if _, err := b.LinkMatrix(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.links), nil
}

// MulticastSupported is false: AMD GPUs have no multicast objects to
// report (intranode never uses multicast anyway).
func (b *Backend) MulticastSupported(ctx context.Context, i int) (bool, error) {
	if err := b.Usable(ctx, i); err != nil {
		return false, err
	}
	return false, nil
}

// Close releases the SMI library. Devices opened from the backend stay
// usable until they are closed; the HIP runtime stays loaded.
func (b *Backend) Close() error {
	if !b.MarkClosed() {
		return nil
	}
	err := b.rccl.Close()
	if b.smi != nil {
		err = errors.Join(err, gpu.Wrap(b.smi.Close(), "rocm: closing %s", b.smi.Library()))
	}
	return err
}

// describeHandles lists the handle kinds a capability set declares, for
// error messages.
func describeHandles(c backend.Capability) string {
	var kinds []string
	if c.Has(backend.CapHandleFD) {
		kinds = append(kinds, "file descriptors")
	}
	if c.Has(backend.CapHandleFabric) {
		kinds = append(kinds, "IPC handles")
	}
	return strings.Join(kinds, " and ")
}

var _ backend.Backend = (*Backend)(nil)
