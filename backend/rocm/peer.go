//go:build rocm

package rocm

import (
	"context"
	"fmt"
	"time"

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
// hipDeviceCanAccessPeer must say yes, peer access is then enabled (once)
// and a real write and read-back through the peer mapping must succeed. The
// answer is cached per pair.
func (b *Backend) PeerAccess(ctx context.Context, i, j int) (bool, error) {
	if err := b.usable(ctx, i, j); err != nil {
		return false, err
	}
	ok, err := b.peers.Get(i, j)
	if err != nil {
		return false, fmt.Errorf("rocm: %w", err)
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
// Errors (the check could not run) are not cached; a refused enable, a
// failed transfer or a wrong read-back is a cached "no".
func (b *Backend) queryPeer(i, j int) (bool, error) {
	d := backend.PeerDetail{From: i, To: j, Bytes: peerTestBytes}
	can, err := b.canAccessPeer(i, j)
	if err != nil {
		return false, err
	}
	d.CanAccessPeer = can
	if !can {
		d.Reason = "hipDeviceCanAccessPeer says no"
		b.details.Record(d)
		return false, nil
	}
	if err := b.hip.EnablePeerAccess(i, j); err != nil {
		d.Reason = err.Error()
		b.details.Record(d)
		b.log.Debug("rocm: enabling peer access failed", "from", i, "to", j, "error", err)
		return false, nil
	}
	d.Enabled = true
	start := time.Now()
	reason, err := b.peerTransfer(i, j)
	if err != nil {
		return false, err
	}
	d.Elapsed = time.Since(start)
	d.Verified = reason == ""
	d.Reason = reason
	b.details.Record(d)
	b.log.Debug("rocm: peer access", "from", i, "to", j, "verified", d.Verified, "reason", reason, "elapsed", d.Elapsed)
	return d.Verified, nil
}

// peerTransfer has device i copy a pattern into memory on j, read back on
// j, then copy a pattern written on j into its own memory. It returns why
// the check failed ("" when it passed), or an error when it could not run.
func (b *Backend) peerTransfer(i, j int) (string, error) {
	remote, err := b.hip.Malloc(j, peerTestBytes)
	if err != nil {
		return "", wrap(err, "rocm: peer check %d→%d: allocating on device %d", i, j, j)
	}
	defer func() { _ = b.hip.Free(j, remote) }()
	local, err := b.hip.Malloc(i, peerTestBytes)
	if err != nil {
		return "", wrap(err, "rocm: peer check %d→%d: allocating on device %d", i, j, i)
	}
	defer func() { _ = b.hip.Free(i, local) }()
	host := make([]byte, peerTestBytes)

	// Write: device i copies into j's memory.
	if err := b.hip.Memset(i, local, peerWritePattern, peerTestBytes); err != nil {
		return "", wrap(err, "rocm: peer check %d→%d: filling device %d", i, j, i)
	}
	if err := b.hip.CopyDtoD(i, remote, local, peerTestBytes); err != nil {
		return fmt.Sprintf("write from device %d to device %d failed: %v", i, j, err), nil
	}
	if err := b.hip.CopyDtoH(j, host, remote); err != nil {
		return "", wrap(err, "rocm: peer check %d→%d: reading device %d", i, j, j)
	}
	if k := firstMismatch(host, peerWritePattern); k >= 0 {
		return fmt.Sprintf("write from device %d read back wrong on device %d at byte %d", i, j, k), nil
	}

	// Read: device i copies j's memory into its own.
	if err := b.hip.Memset(j, remote, peerReadPattern, peerTestBytes); err != nil {
		return "", wrap(err, "rocm: peer check %d→%d: filling device %d", i, j, j)
	}
	if err := b.hip.CopyDtoD(i, local, remote, peerTestBytes); err != nil {
		return fmt.Sprintf("read by device %d from device %d failed: %v", i, j, err), nil
	}
	if err := b.hip.CopyDtoH(i, host, local); err != nil {
		return "", wrap(err, "rocm: peer check %d→%d: reading device %d", i, j, i)
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

// FabricSupported reports whether device i shares memory as opaque handle
// bytes (backend.HandleFabric): HIP IPC memory handles, which the backend
// uses where the runtime cannot export uncached memory as file
// descriptors. Where it can, the answer is no and memory travels as
// descriptors. Otherwise a real allocation of the kind AllocShareable makes
// must export an IPC handle. The import half of the round trip needs
// another process (HIP refuses to open a handle in the process that made
// it, and this process imports its own exports by address), so it happens
// when peers Import. The answer is cached.
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
	ok, reason := true, ""
	if b.share.kind != backend.HandleFabric {
		ok, reason = false, "memory is shared as file descriptors: "+b.share.why
	} else if err := b.ipcRoundTrip(i); err != nil {
		ok, reason = false, "IPC handle export failed: "+err.Error()
	}
	if ok {
		b.fabric[i] = connectivity.AccessYes
	} else {
		b.fabric[i] = connectivity.AccessNo
	}
	b.fabricReason[i] = reason
	b.log.Debug("rocm: IPC handles", "device", i, "supported", ok, "reason", reason)
	return ok, nil
}

// ipcRoundTrip allocates one granule of IPC-shareable memory on device i,
// exports its handle and frees it.
func (b *Backend) ipcRoundTrip(i int) error {
	d := &device{b: b, index: i, hip: b.hip, granularity: ipcGranularity}
	blk, err := d.allocIPC(ipcGranularity)
	if err != nil {
		return err
	}
	unregisterExport(blk)
	return blk.release()
}

// FabricReason says why FabricSupported(i) answered no, once it has run;
// "" otherwise.
func (b *Backend) FabricReason(i int) string {
	b.fabricMu.Lock()
	defer b.fabricMu.Unlock()
	if i < 0 || i >= len(b.fabricReason) {
		return ""
	}
	return b.fabricReason[i]
}
