//go:build cuda

package cuda

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// FabricState returns device i's NVLink fabric state as NVML reports it, and
// — once FabricSupported has run for the device — why fabric handles are not
// used, if they are not.
func (b *Backend) FabricState(ctx context.Context, i int) (FabricState, string, error) {
	if err := b.Usable(ctx, i); err != nil {
		return FabricState{}, "", err
	}
	if b.nvml == nil {
		return FabricState{}, "", b.nvmlErr
	}
	st, err := b.fabricState(i)
	if err != nil {
		return FabricState{}, "", err
	}
	return st, b.FabricReason(i), nil
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

// CheckPeersThroughMappings tells symmetric memory to check peer access
// through its own mappings rather than PeerAccess, whose real transfer
// needs a context on the peer's device (backend.MappedPeerChecker).
func (b *Backend) CheckPeersThroughMappings() bool { return true }
