//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// peerTestBytes is how much the peer-access check writes and reads back.
const peerTestBytes = 256 << 10

// Bytes the peer-access check writes through the peer mapping and reads
// back through it.
const (
	peerWritePattern = 0xa5
	peerReadPattern  = 0x5a
)

// PeerAccess reports whether device i can read and write device j's memory:
// cuDeviceCanAccessPeer must say yes, peer access is then enabled (once) and
// a real write and read-back through the peer mapping must succeed. The
// answer is cached per pair.
func (b *Backend) PeerAccess(ctx context.Context, i, j int) (bool, error) {
	if err := b.usable(ctx, i, j); err != nil {
		return false, err
	}
	ok, err := b.peers.Get(i, j)
	if err != nil {
		return false, fmt.Errorf("cuda: %w", err)
	}
	return ok, nil
}

// PeerTest returns how PeerAccess(i, j) was decided, running the check
// first if it has not run yet (backend.PeerTester).
func (b *Backend) PeerTest(ctx context.Context, i, j int) (backend.PeerDetail, error) {
	if _, err := b.PeerAccess(ctx, i, j); err != nil {
		return backend.PeerDetail{}, err
	}
	return b.details.Lookup(i, j), nil
}

var _ backend.PeerTester = (*Backend)(nil)

// queryPeer is the PeerCache query: it enables access itself because the
// check needs the peer mapping, so the cache gets no enable callback.
// Errors (the check could not run) are not cached; a failed transfer or a
// wrong read-back is a cached "no".
func (b *Backend) queryPeer(i, j int) (bool, error) {
	d := backend.PeerDetail{From: i, To: j, Bytes: peerTestBytes}
	can, err := b.canAccessPeer(i, j)
	if err != nil {
		return false, err
	}
	d.CanAccessPeer = can
	if !can {
		d.Reason = "cuDeviceCanAccessPeer says no"
		b.details.Record(d)
		return false, nil
	}
	ci, err := b.context(i)
	if err != nil {
		return false, err
	}
	cj, err := b.context(j)
	if err != nil {
		return false, err
	}
	if err := enablePeer(ci, cj); err != nil {
		d.Reason = err.Error()
		b.details.Record(d)
		b.log.Debug("cuda: enabling peer access failed", "from", i, "to", j, "error", err)
		return false, nil
	}
	d.Enabled = true
	start := time.Now()
	reason, err := b.peerTransfer(i, j, ci, cj)
	if err != nil {
		return false, err
	}
	d.Elapsed = time.Since(start)
	d.Verified = reason == ""
	d.Reason = reason
	b.details.Record(d)
	b.log.Debug("cuda: peer access", "from", i, "to", j, "verified", d.Verified, "reason", reason, "elapsed", d.Elapsed)
	return d.Verified, nil
}

// peerTransfer writes a pattern from i's context into memory on j and reads
// it back on j, then writes one on j and reads it from i's context. It
// returns why the check failed ("" when it passed), or an error when it
// could not run at all.
func (b *Backend) peerTransfer(i, j int, ci, cj ctxHandle) (string, error) {
	remote, err := memAlloc(cj, peerTestBytes)
	if err != nil {
		return "", wrap(err, "cuda: peer check %d→%d: allocating on device %d", i, j, j)
	}
	defer func() { _ = memFree(cj, remote) }()
	local, err := memAlloc(ci, peerTestBytes)
	if err != nil {
		return "", wrap(err, "cuda: peer check %d→%d: allocating on device %d", i, j, i)
	}
	defer func() { _ = memFree(ci, local) }()
	host := make([]byte, peerTestBytes)

	// Write: device i's context copies into j's memory.
	if err := memset(ci, local, peerWritePattern, peerTestBytes); err != nil {
		return "", wrap(err, "cuda: peer check %d→%d: filling device %d", i, j, i)
	}
	if err := copyDtoD(ci, remote, local, peerTestBytes); err != nil {
		return fmt.Sprintf("write from device %d to device %d failed: %v", i, j, err), nil
	}
	if err := copyDtoH(cj, host, remote); err != nil {
		return "", wrap(err, "cuda: peer check %d→%d: reading device %d", i, j, j)
	}
	if k := firstMismatch(host, peerWritePattern); k >= 0 {
		return fmt.Sprintf("write from device %d read back wrong on device %d at byte %d", i, j, k), nil
	}

	// Read: device i's context copies j's memory into its own.
	if err := memset(cj, remote, peerReadPattern, peerTestBytes); err != nil {
		return "", wrap(err, "cuda: peer check %d→%d: filling device %d", i, j, j)
	}
	if err := copyDtoD(ci, local, remote, peerTestBytes); err != nil {
		return fmt.Sprintf("read by device %d from device %d failed: %v", i, j, err), nil
	}
	if err := copyDtoH(ci, host, local); err != nil {
		return "", wrap(err, "cuda: peer check %d→%d: reading device %d", i, j, i)
	}
	if k := firstMismatch(host, peerReadPattern); k >= 0 {
		return fmt.Sprintf("read by device %d from device %d came back wrong at byte %d", i, j, k), nil
	}
	return "", nil
}

// firstMismatch returns the index of the first byte of b that is not v, or
// -1.
func firstMismatch(b []byte, v byte) int {
	for k, x := range b {
		if x != v {
			return k
		}
	}
	return -1
}

// FabricSupported reports whether device i can share memory through fabric
// handles: NVML's fabric state must not be "Not Supported", and a real
// allocation with a fabric handle must export and import back. The answer
// is cached; without it shareable memory travels as POSIX file descriptors.
func (b *Backend) FabricSupported(ctx context.Context, i int) (bool, error) {
	if err := b.usable(ctx, i); err != nil {
		return false, err
	}
	b.fabricMu.Lock()
	defer b.fabricMu.Unlock()
	switch b.fabric[i] {
	case connectivity.AccessYes:
		return true, nil
	case connectivity.AccessNo:
		return false, nil
	}
	ok, reason, err := b.checkFabric(i)
	if err != nil {
		return false, err
	}
	if ok {
		b.fabric[i] = connectivity.AccessYes
	} else {
		b.fabric[i] = connectivity.AccessNo
	}
	b.fabricReason[i] = reason
	b.log.Debug("cuda: fabric handles", "device", i, "supported", ok, "reason", reason)
	return ok, nil
}

func (b *Backend) checkFabric(i int) (bool, string, error) {
	if b.nvml == nil {
		return false, b.nvmlErr.Error(), nil
	}
	st, err := b.fabricState(i)
	if err != nil {
		return false, "", err
	}
	if !st.Usable {
		return false, "NVML fabric state is " + st.String(), nil
	}
	c, err := b.context(i)
	if err != nil {
		return false, "", err
	}
	if err := fabricRoundTrip(c, b.devices[i].ordinal); err != nil {
		return false, "fabric handle round trip failed: " + err.Error(), nil
	}
	return true, "", nil
}

// FabricState returns device i's NVLink fabric state as NVML reports it, and
// — once FabricSupported has run for the device — why fabric handles are not
// used, if they are not.
func (b *Backend) FabricState(ctx context.Context, i int) (FabricState, string, error) {
	if err := b.usable(ctx, i); err != nil {
		return FabricState{}, "", err
	}
	if b.nvml == nil {
		return FabricState{}, "", b.nvmlErr
	}
	st, err := b.fabricState(i)
	if err != nil {
		return FabricState{}, "", err
	}
	b.fabricMu.Lock()
	reason := b.fabricReason[i]
	b.fabricMu.Unlock()
	return st, reason, nil
}

// fabricState reads device i's fabric state through the real NVML library,
// checking first that the entry point exists (calling a missing one would
// crash).
func (b *Backend) fabricState(i int) (FabricState, error) {
	k, dev, err := nvmlDeviceByBusID(b.nvml, b.devices[i].info.PCIBusID)
	if err != nil {
		return FabricState{}, fmt.Errorf("cuda: device %d: %w", i, err)
	}
	ext := b.nvml.Extensions()
	switch {
	case ext.LookupSymbol("nvmlDeviceGetGpuFabricInfo") == nil:
		st, err := nvmlFabricState(k, b.devices[i].info.PCIBusID, dev)
		if err != nil {
			return FabricState{}, fmt.Errorf("cuda: device %d: %w", i, err)
		}
		return st, nil
	case ext.LookupSymbol("nvmlDeviceGetGpuFabricInfoV") == nil:
		info, ret := dev.GetGpuFabricInfoV().V2()
		if ret != nvml.SUCCESS {
			if ret == nvml.ERROR_NOT_SUPPORTED {
				return FabricState{State: "Not Supported"}, nil
			}
			return FabricState{}, fmt.Errorf("cuda: device %d: %w", i, nvmlError(k, b.devices[i].info.PCIBusID, "GetGpuFabricInfoV", ret))
		}
		return fabricStateOf(info.State, info.Status), nil
	}
	return FabricState{State: "Not Supported"}, nil
}

// PeerAccessMatrix runs PeerAccess for every ordered pair and returns the
// answers; a convenience for doctor output.
func (b *Backend) PeerAccessMatrix(ctx context.Context) ([][]bool, error) {
	if err := b.usable(ctx); err != nil {
		return nil, err
	}
	n := len(b.devices)
	out := make([][]bool, n)
	for i := range n {
		out[i] = make([]bool, n)
		for j := range n {
			ok, err := b.PeerAccess(ctx, i, j)
			if err != nil {
				return nil, err
			}
			out[i][j] = ok
		}
	}
	return out, nil
}

// CheckPeersThroughMappings tells symmetric memory to check peer access
// through its own mappings rather than PeerAccess, whose real transfer
// needs a context on the peer's device (backend.MappedPeerChecker).
func (b *Backend) CheckPeersThroughMappings() bool { return true }
