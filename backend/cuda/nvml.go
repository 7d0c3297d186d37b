//go:build cuda

package cuda

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// NVMLDevice is one device as NVML reports it, with the CUDA index it maps
// to. NVML numbers devices in PCI bus order; CUDA may order them differently
// (CUDA_DEVICE_ORDER) or hide some (CUDA_VISIBLE_DEVICES), so the two are
// matched by PCI bus id.
type NVMLDevice struct {
	// NVMLIndex is the device's NVML index.
	NVMLIndex int `json:"nvml_index"`
	// CUDAIndex is the CUDA ordinal of the same device, -1 if CUDA does not
	// see it.
	CUDAIndex int `json:"cuda_index"`
	// Name is the product name.
	Name string `json:"name"`
	// PCIBusID is the bus id in NormalizeBusID form.
	PCIBusID string `json:"pci_bus_id"`
	// UUID is the device UUID ("GPU-…").
	UUID string `json:"uuid"`
	// MemoryBytes is the total framebuffer memory.
	MemoryBytes uint64 `json:"memory_bytes"`
}

// NormalizeBusID is connectivity.NormalizeBusID: NVML's "00000000:19:00.0"
// and CUDA's "0000:19:00.0" compare equal.
// A malformed id is an error matching backend.ErrInvalidArgument.
func NormalizeBusID(id string) (string, error) {
	n, err := connectivity.NormalizeBusID(id)
	if err != nil {
		return "", backend.Errorf(backend.CodeInvalidArgument, "%w", err)
	}
	return n, nil
}

// busIDIndex maps the normalised bus ids of the CUDA devices, in CUDA
// ordinal order, to their ordinals.
func busIDIndex(cudaBusIDs []string) (map[string]int, error) {
	index := make(map[string]int, len(cudaBusIDs))
	for i, id := range cudaBusIDs {
		n, err := NormalizeBusID(id)
		if err != nil {
			return nil, fmt.Errorf("CUDA device %d: %w", i, err)
		}
		if prev, dup := index[n]; dup {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "CUDA devices %d and %d share PCI bus id %s", prev, i, n)
		}
		index[n] = i
	}
	return index, nil
}

// nvmlError turns a failed NVML call on one device into an error that names
// the device.
func nvmlError(k int, busID, call string, ret nvml.Return) error {
	code := backend.CodeInternal
	switch ret {
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		code = backend.CodeNotSupported
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_UNINITIALIZED, nvml.ERROR_GPU_IS_LOST:
		code = backend.CodeUnavailable
	case nvml.ERROR_TIMEOUT:
		code = backend.CodeTimeout
	}
	if busID == "" {
		return backend.Errorf(code, "NVML device %d: %s: %v", k, call, ret)
	}
	return backend.Errorf(code, "NVML device %d (%s): %s: %v", k, busID, call, ret)
}

// nvmlBusID reads and normalises an NVML device's PCI bus id.
func nvmlBusID(k int, dev nvml.Device) (string, error) {
	pci, ret := dev.GetPciInfo()
	if ret != nvml.SUCCESS {
		return "", nvmlError(k, "", "GetPciInfo", ret)
	}
	id, err := NormalizeBusID(cString(pci.BusId[:]))
	if err != nil {
		return "", fmt.Errorf("NVML device %d: %w", k, err)
	}
	return id, nil
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// nvmlDevices walks NVML's devices, calling fn with each one's index,
// handle, normalised bus id and CUDA ordinal (-1 when CUDA does not see it).
func nvmlDevices(lib nvml.Interface, index map[string]int, fn func(k int, dev nvml.Device, busID string, cudaIndex int) error) error {
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nvmlError(-1, "", "DeviceGetCount", ret)
	}
	for k := range count {
		dev, ret := lib.DeviceGetHandleByIndex(k)
		if ret != nvml.SUCCESS {
			return nvmlError(k, "", "DeviceGetHandleByIndex", ret)
		}
		busID, err := nvmlBusID(k, dev)
		if err != nil {
			return err
		}
		ci, ok := index[busID]
		if !ok {
			ci = -1
		}
		if err := fn(k, dev, busID, ci); err != nil {
			return err
		}
	}
	return nil
}

// NVMLInventory lists NVML's devices with their names, bus ids, UUIDs and
// memory, each mapped to its CUDA ordinal through cudaBusIDs (the CUDA
// devices' bus ids in ordinal order). An NVML failure names the device.
func NVMLInventory(lib nvml.Interface, cudaBusIDs []string) ([]NVMLDevice, error) {
	index, err := busIDIndex(cudaBusIDs)
	if err != nil {
		return nil, err
	}
	var out []NVMLDevice
	err = nvmlDevices(lib, index, func(k int, dev nvml.Device, busID string, ci int) error {
		name, ret := dev.GetName()
		if ret != nvml.SUCCESS {
			return nvmlError(k, busID, "GetName", ret)
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			return nvmlError(k, busID, "GetUUID", ret)
		}
		mem, ret := dev.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nvmlError(k, busID, "GetMemoryInfo", ret)
		}
		out = append(out, NVMLDevice{NVMLIndex: k, CUDAIndex: ci, Name: name, PCIBusID: busID, UUID: uuid, MemoryBytes: mem.Total})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NVLinkMatrix counts the NVLinks between the CUDA devices whose PCI bus
// ids are given in CUDA ordinal order; Links[i][j] is in CUDA ordinals.
//
// Each device's links are walked up to nvml.NVLINK_MAX_LINKS: a link that
// is enabled and ends at a GPU adds one to that GPU's count (the remote bus
// id is mapped back to a CUDA ordinal); a link that ends at an NVSwitch
// counts towards the device's switch links. Two devices that both reach the
// switch fabric are linked by the smaller of their switch link counts, which
// is what nvidia-smi topo -m shows as NV#. Links NVML reports as absent
// (not supported, or an index past the device's last link) are skipped; any
// other NVML failure is an error naming the device.
func NVLinkMatrix(lib nvml.Interface, cudaBusIDs []string) (connectivity.Matrix, error) {
	n := len(cudaBusIDs)
	index, err := busIDIndex(cudaBusIDs)
	if err != nil {
		return connectivity.Matrix{}, err
	}
	m := connectivity.NewMatrix(connectivity.LinkNVLink, n)
	switchLinks := make([]int, n)
	seen := make([]bool, n)
	err = nvmlDevices(lib, index, func(k int, dev nvml.Device, busID string, i int) error {
		if i < 0 {
			return nil
		}
		seen[i] = true
		for link := range nvml.NVLINK_MAX_LINKS {
			state, ret := dev.GetNvLinkState(link)
			switch ret {
			case nvml.SUCCESS:
			case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT:
				continue
			default:
				return nvmlError(k, busID, fmt.Sprintf("GetNvLinkState(link %d)", link), ret)
			}
			if state != nvml.FEATURE_ENABLED {
				continue
			}
			remote, ret := dev.GetNvLinkRemoteDeviceType(link)
			switch ret {
			case nvml.SUCCESS:
			case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
				// Old drivers cannot say what is at the far end: a GPU
				// is recognised by its bus id below, anything else is
				// left out.
				remote = nvml.NVLINK_DEVICE_TYPE_UNKNOWN
			default:
				return nvmlError(k, busID, fmt.Sprintf("GetNvLinkRemoteDeviceType(link %d)", link), ret)
			}
			switch remote {
			case nvml.NVLINK_DEVICE_TYPE_SWITCH:
				switchLinks[i]++
			case nvml.NVLINK_DEVICE_TYPE_IBMNPU:
				// A link to the CPU: not a path between GPUs.
			default:
				pci, ret := dev.GetNvLinkRemotePciInfo(link)
				if ret != nvml.SUCCESS {
					if remote == nvml.NVLINK_DEVICE_TYPE_UNKNOWN {
						continue
					}
					return nvmlError(k, busID, fmt.Sprintf("GetNvLinkRemotePciInfo(link %d)", link), ret)
				}
				rid, err := NormalizeBusID(cString(pci.BusId[:]))
				if err != nil {
					return fmt.Errorf("NVML device %d (%s) link %d: %w", k, busID, link, err)
				}
				if j, ok := index[rid]; ok && j != i {
					m.Links[i][j]++
				}
			}
		}
		return nil
	})
	if err != nil {
		return connectivity.Matrix{}, err
	}
	for i, ok := range seen {
		if !ok {
			return connectivity.Matrix{}, backend.Errorf(backend.CodeNotFound, "CUDA device %d (%s) is not among NVML's devices", i, cudaBusIDs[i])
		}
	}
	for i := range n {
		for j := range n {
			if i != j && switchLinks[i] > 0 && switchLinks[j] > 0 {
				m.Links[i][j] += min(switchLinks[i], switchLinks[j])
			}
		}
	}
	return m, nil
}

// FabricState describes a device's NVLink fabric registration as NVML
// reports it.
type FabricState struct {
	// State is the fabric state: "Not Supported", "Not Started",
	// "In Progress" or "Completed" (as nvidia-smi -q prints it).
	State string `json:"state"`
	// Status is NVML's status for a completed registration ("Success" or
	// the failure), empty before completion.
	Status string `json:"status,omitempty"`
	// Usable is true when the state is not "Not Supported": only then is
	// the fabric export/import round trip worth trying.
	Usable bool `json:"usable"`
}

// String renders the state and, when set, the status.
func (s FabricState) String() string {
	if s.Status == "" {
		return s.State
	}
	return s.State + " (" + s.Status + ")"
}

// nvmlFabricState reads a device's fabric state. A device or driver that
// cannot report one is "Not Supported".
func nvmlFabricState(k int, busID string, dev nvml.Device) (FabricState, error) {
	info, ret := dev.GetGpuFabricInfo()
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return FabricState{State: "Not Supported"}, nil
	default:
		return FabricState{}, nvmlError(k, busID, "GetGpuFabricInfo", ret)
	}
	return fabricStateOf(info.State, info.Status), nil
}

// fabricStateOf names an NVML fabric state and status.
func fabricStateOf(state uint8, status uint32) FabricState {
	st := FabricState{Usable: state != nvml.GPU_FABRIC_STATE_NOT_SUPPORTED}
	switch state {
	case nvml.GPU_FABRIC_STATE_NOT_SUPPORTED:
		st.State = "Not Supported"
	case nvml.GPU_FABRIC_STATE_NOT_STARTED:
		st.State = "Not Started"
	case nvml.GPU_FABRIC_STATE_IN_PROGRESS:
		st.State = "In Progress"
	case nvml.GPU_FABRIC_STATE_COMPLETED:
		st.State = "Completed"
		if nvml.Return(status) == nvml.SUCCESS {
			st.Status = "Success"
		} else {
			st.Status = nvml.Return(status).Error()
		}
	default:
		st.State = fmt.Sprintf("state %d", state)
	}
	return st
}

// nvmlDeviceByBusID finds the NVML device with the given normalised bus id.
func nvmlDeviceByBusID(lib nvml.Interface, busID string) (int, nvml.Device, error) {
	found := -1
	var handle nvml.Device
	err := nvmlDevices(lib, map[string]int{busID: 0}, func(k int, dev nvml.Device, _ string, ci int) error {
		if ci == 0 && found < 0 {
			found, handle = k, dev
		}
		return nil
	})
	if err != nil {
		return -1, nil, err
	}
	if found < 0 {
		return -1, nil, backend.Errorf(backend.CodeNotFound, "no NVML device has PCI bus id %s", busID)
	}
	return found, handle, nil
}
