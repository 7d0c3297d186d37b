//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// mockLink is one NVLink of a mocked device.
type mockLink struct {
	enabled bool
	remote  nvml.IntNvLinkDeviceType
	peer    string // remote PCI bus id, NVML format, for GPU links
}

// mockGPU is one device of a mocked NVML.
type mockGPU struct {
	busID  string // NVML format: 8-digit domain
	links  []mockLink
	broken string // name of the device call that fails, if any
	fabric nvml.GpuFabricInfo
}

func busIDBytes(s string) [32]int8 {
	var b [32]int8
	for i := 0; i < len(s) && i < len(b)-1; i++ {
		b[i] = int8(s[i])
	}
	return b
}

// newMockNVML builds an nvml.Interface whose devices are gpus, in NVML
// order. Link indexes past a device's links answer ERROR_INVALID_ARGUMENT,
// as NVML does.
func newMockNVML(gpus []mockGPU) *mock.Interface {
	devs := make([]*mock.Device, len(gpus))
	for k, g := range gpus {
		fail := func(call string) nvml.Return {
			if g.broken == call {
				return nvml.ERROR_UNKNOWN
			}
			return nvml.SUCCESS
		}
		devs[k] = &mock.Device{
			GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
				return nvml.PciInfo{BusId: busIDBytes(g.busID)}, fail("GetPciInfo")
			},
			GetNameFunc: func() (string, nvml.Return) {
				return "NVIDIA H200", fail("GetName")
			},
			GetUUIDFunc: func() (string, nvml.Return) {
				return fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", k), fail("GetUUID")
			},
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
				return nvml.Memory{Total: 141 << 30}, fail("GetMemoryInfo")
			},
			GetNvLinkStateFunc: func(link int) (nvml.EnableState, nvml.Return) {
				if r := fail("GetNvLinkState"); r != nvml.SUCCESS {
					return 0, r
				}
				if g.links == nil {
					return 0, nvml.ERROR_NOT_SUPPORTED
				}
				if link >= len(g.links) {
					return 0, nvml.ERROR_INVALID_ARGUMENT
				}
				if g.links[link].enabled {
					return nvml.FEATURE_ENABLED, nvml.SUCCESS
				}
				return nvml.FEATURE_DISABLED, nvml.SUCCESS
			},
			GetNvLinkRemoteDeviceTypeFunc: func(link int) (nvml.IntNvLinkDeviceType, nvml.Return) {
				if r := fail("GetNvLinkRemoteDeviceType"); r != nvml.SUCCESS {
					return 0, r
				}
				return g.links[link].remote, nvml.SUCCESS
			},
			GetNvLinkRemotePciInfoFunc: func(link int) (nvml.PciInfo, nvml.Return) {
				if r := fail("GetNvLinkRemotePciInfo"); r != nvml.SUCCESS {
					return nvml.PciInfo{}, r
				}
				if g.links[link].remote != nvml.NVLINK_DEVICE_TYPE_GPU {
					return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED
				}
				return nvml.PciInfo{BusId: busIDBytes(g.links[link].peer)}, nvml.SUCCESS
			},
			GetGpuFabricInfoFunc: func() (nvml.GpuFabricInfo, nvml.Return) {
				return g.fabric, fail("GetGpuFabricInfo")
			},
		}
	}
	return &mock.Interface{
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(k int) (nvml.Device, nvml.Return) {
			if k < 0 || k >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[k], nvml.SUCCESS
		},
	}
}

// nvmlBus is the NVML spelling of bus b; cudaBus the CUDA spelling.
func nvmlBus(b int) string { return fmt.Sprintf("00000000:%02X:00.0", b) }
func cudaBus(b int) string { return fmt.Sprintf("0000:%02X:00.0", b) }

func switchLinks(n int) []mockLink {
	links := make([]mockLink, n)
	for i := range links {
		links[i] = mockLink{enabled: true, remote: nvml.NVLINK_DEVICE_TYPE_SWITCH}
	}
	return links
}

// switchBox has n GPUs at buses 0x10.. with perGPU switch links each.
func switchBox(n, perGPU int) ([]mockGPU, []string) {
	gpus := make([]mockGPU, n)
	buses := make([]string, n)
	for i := range gpus {
		gpus[i] = mockGPU{busID: nvmlBus(0x10 + i), links: switchLinks(perGPU)}
		buses[i] = cudaBus(0x10 + i)
	}
	return gpus, buses
}

func requireAllPairs(t *testing.T, links [][]int, want int) {
	t.Helper()
	for i := range links {
		for j := range links[i] {
			if i == j {
				require.Zero(t, links[i][j], "diagonal [%d][%d]", i, j)
			} else {
				require.Equal(t, want, links[i][j], "links [%d][%d]", i, j)
			}
		}
	}
}

func TestNVLinkMatrixDirectMesh(t *testing.T) {
	// 4 GPUs, every pair joined by 6 direct links (24 links per GPU).
	const n, perPair = 4, 6
	gpus := make([]mockGPU, n)
	buses := make([]string, n)
	for i := range gpus {
		gpus[i].busID = nvmlBus(0x20 + i)
		buses[i] = cudaBus(0x20 + i)
		for j := range n {
			if j == i {
				continue
			}
			for range perPair {
				gpus[i].links = append(gpus[i].links, mockLink{enabled: true, remote: nvml.NVLINK_DEVICE_TYPE_GPU, peer: nvmlBus(0x20 + j)})
			}
		}
	}
	m, err := NVLinkMatrix(newMockNVML(gpus), buses)
	require.NoError(t, err)
	require.NoError(t, m.Validate())
	require.Equal(t, n, m.Size())
	requireAllPairs(t, m.Links, perPair)
}

func TestNVLinkMatrixNVSwitch8(t *testing.T) {
	gpus, buses := switchBox(8, 18)
	m, err := NVLinkMatrix(newMockNVML(gpus), buses)
	require.NoError(t, err)
	require.NoError(t, m.Validate())
	requireAllPairs(t, m.Links, 18)
}

func TestNVLinkMatrixTwoH200(t *testing.T) {
	// The 2×H200 test host: each GPU has 18 links to NVSwitches, and
	// nvidia-smi topo -m reads NV18 both ways.
	gpus := []mockGPU{
		{busID: "00000000:19:00.0", links: switchLinks(18)},
		{busID: "00000000:3B:00.0", links: switchLinks(18)},
	}
	m, err := NVLinkMatrix(newMockNVML(gpus), []string{"0000:19:00.0", "0000:3b:00.0"})
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 18}, {18, 0}}, m.Links)
}

func TestNVLinkMatrixUnevenSwitchLinks(t *testing.T) {
	// A GPU with some links down reaches the fabric with fewer lanes; a
	// pair is limited by the smaller side.
	gpus, buses := switchBox(3, 18)
	for l := 12; l < 18; l++ {
		gpus[2].links[l].enabled = false
	}
	m, err := NVLinkMatrix(newMockNVML(gpus), buses)
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 18, 12}, {18, 0, 12}, {12, 12, 0}}, m.Links)
}

func TestNVLinkMatrixPCIeOnly(t *testing.T) {
	t.Run("not supported", func(t *testing.T) {
		gpus := []mockGPU{{busID: nvmlBus(0x01)}, {busID: nvmlBus(0x02)}}
		m, err := NVLinkMatrix(newMockNVML(gpus), []string{cudaBus(0x01), cudaBus(0x02)})
		require.NoError(t, err)
		requireAllPairs(t, m.Links, 0)
	})
	t.Run("links down", func(t *testing.T) {
		down := make([]mockLink, 18)
		gpus := []mockGPU{{busID: nvmlBus(0x01), links: down}, {busID: nvmlBus(0x02), links: down}}
		m, err := NVLinkMatrix(newMockNVML(gpus), []string{cudaBus(0x01), cudaBus(0x02)})
		require.NoError(t, err)
		requireAllPairs(t, m.Links, 0)
	})
}

func TestNVLinkMatrixIgnoresCPULinks(t *testing.T) {
	gpus := []mockGPU{
		{busID: nvmlBus(0x04), links: []mockLink{
			{enabled: true, remote: nvml.NVLINK_DEVICE_TYPE_IBMNPU},
			{enabled: true, remote: nvml.NVLINK_DEVICE_TYPE_GPU, peer: nvmlBus(0x05)},
		}},
		{busID: nvmlBus(0x05), links: []mockLink{
			{enabled: true, remote: nvml.NVLINK_DEVICE_TYPE_GPU, peer: nvmlBus(0x04)},
			{enabled: true, remote: nvml.NVLINK_DEVICE_TYPE_IBMNPU},
		}},
	}
	m, err := NVLinkMatrix(newMockNVML(gpus), []string{cudaBus(0x04), cudaBus(0x05)})
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 1}, {1, 0}}, m.Links)
}

func TestNVLinkMatrixPermutedCUDAOrder(t *testing.T) {
	// NVML order A B C D (bus order); a ring A-B (1 link), B-C (2), C-D (3),
	// D-A (4). CUDA enumerates them as C A D B.
	bus := map[string]int{"A": 0x0a, "B": 0x0b, "C": 0x0c, "D": 0x0d}
	gpu := func(self string, peers map[string]int) mockGPU {
		g := mockGPU{busID: nvmlBus(bus[self])}
		for _, p := range []string{"A", "B", "C", "D"} {
			for range peers[p] {
				g.links = append(g.links, mockLink{enabled: true, remote: nvml.NVLINK_DEVICE_TYPE_GPU, peer: nvmlBus(bus[p])})
			}
		}
		return g
	}
	gpus := []mockGPU{
		gpu("A", map[string]int{"B": 1, "D": 4}),
		gpu("B", map[string]int{"A": 1, "C": 2}),
		gpu("C", map[string]int{"B": 2, "D": 3}),
		gpu("D", map[string]int{"C": 3, "A": 4}),
	}
	order := []string{"C", "A", "D", "B"}
	buses := make([]string, len(order))
	for i, name := range order {
		buses[i] = cudaBus(bus[name])
	}
	lib := newMockNVML(gpus)
	m, err := NVLinkMatrix(lib, buses)
	require.NoError(t, err)
	// CUDA indexes: C=0 A=1 D=2 B=3.
	require.Equal(t, [][]int{
		{0, 0, 3, 2}, // C: D 3, B 2
		{0, 0, 4, 1}, // A: D 4, B 1
		{3, 4, 0, 0}, // D: C 3, A 4
		{2, 1, 0, 0}, // B: C 2, A 1
	}, m.Links)

	inv, err := NVMLInventory(lib, buses)
	require.NoError(t, err)
	require.Len(t, inv, 4)
	for k, d := range inv {
		require.Equal(t, k, d.NVMLIndex)
		require.Equal(t, "NVIDIA H200", d.Name)
		require.Equal(t, uint64(141<<30), d.MemoryBytes)
	}
	// NVML A B C D → CUDA 1 3 0 2.
	require.Equal(t, []int{1, 3, 0, 2}, []int{inv[0].CUDAIndex, inv[1].CUDAIndex, inv[2].CUDAIndex, inv[3].CUDAIndex})
	require.Equal(t, "0000:0a:00.0", inv[0].PCIBusID)
}

func TestNVLinkMatrixHiddenDevices(t *testing.T) {
	// CUDA_VISIBLE_DEVICES shows 2 of 4 switch-connected GPUs, in reverse.
	gpus, _ := switchBox(4, 18)
	lib := newMockNVML(gpus)
	m, err := NVLinkMatrix(lib, []string{cudaBus(0x13), cudaBus(0x11)})
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 18}, {18, 0}}, m.Links)

	inv, err := NVMLInventory(lib, []string{cudaBus(0x13), cudaBus(0x11)})
	require.NoError(t, err)
	require.Equal(t, []int{-1, 1, -1, 0}, []int{inv[0].CUDAIndex, inv[1].CUDAIndex, inv[2].CUDAIndex, inv[3].CUDAIndex})
}

func TestNVLinkMatrixCUDADeviceUnknownToNVML(t *testing.T) {
	gpus, _ := switchBox(2, 18)
	_, err := NVLinkMatrix(newMockNVML(gpus), []string{cudaBus(0x10), cudaBus(0x55)})
	require.ErrorIs(t, err, backend.ErrNotFound)
	require.ErrorContains(t, err, "CUDA device 1 (0000:55:00.0)")
}

func TestNVLinkMatrixFailingDevice(t *testing.T) {
	for _, call := range []string{"GetNvLinkState", "GetNvLinkRemoteDeviceType", "GetPciInfo"} {
		t.Run(call, func(t *testing.T) {
			gpus, buses := switchBox(4, 18)
			gpus[2].broken = call
			_, err := NVLinkMatrix(newMockNVML(gpus), buses)
			require.Error(t, err)
			if call == "GetPciInfo" {
				require.ErrorContains(t, err, "NVML device 2: GetPciInfo")
			} else {
				require.ErrorContains(t, err, "NVML device 2 (0000:12:00.0): "+call+"(link 0)")
			}
			require.ErrorContains(t, err, "ERROR_UNKNOWN")
			require.ErrorIs(t, err, backend.ErrInternal)
		})
	}
	t.Run("remote pci", func(t *testing.T) {
		gpus := []mockGPU{
			{busID: nvmlBus(1), links: []mockLink{{enabled: true, remote: nvml.NVLINK_DEVICE_TYPE_GPU, peer: nvmlBus(2)}}},
			{busID: nvmlBus(2), links: []mockLink{{enabled: true, remote: nvml.NVLINK_DEVICE_TYPE_GPU, peer: nvmlBus(1)}}, broken: "GetNvLinkRemotePciInfo"},
		}
		_, err := NVLinkMatrix(newMockNVML(gpus), []string{cudaBus(1), cudaBus(2)})
		require.ErrorContains(t, err, "NVML device 1 (0000:02:00.0): GetNvLinkRemotePciInfo(link 0)")
	})
	t.Run("inventory", func(t *testing.T) {
		gpus, buses := switchBox(2, 18)
		gpus[1].broken = "GetUUID"
		_, err := NVMLInventory(newMockNVML(gpus), buses)
		require.ErrorContains(t, err, "NVML device 1 (0000:11:00.0): GetUUID: ERROR_UNKNOWN")
	})
	t.Run("count", func(t *testing.T) {
		lib := &mock.Interface{DeviceGetCountFunc: func() (int, nvml.Return) { return 0, nvml.ERROR_DRIVER_NOT_LOADED }}
		_, err := NVLinkMatrix(lib, []string{cudaBus(1)})
		require.ErrorIs(t, err, backend.ErrUnavailable)
		require.ErrorContains(t, err, "DeviceGetCount")
	})
}

// TestBusIDs checks the backend's use of connectivity.NormalizeBusID (its
// cases are there): malformed ids match ErrInvalidArgument, and two devices
// on one bus id are refused.
func TestBusIDs(t *testing.T) {
	_, err := NormalizeBusID("0000:19:20.0")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	_, err = busIDIndex([]string{"0000:19:00.0", "00000000:19:00.0"})
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, "CUDA devices 0 and 1 share PCI bus id 0000:19:00.0")
}

func TestNVMLFabricState(t *testing.T) {
	for _, c := range []struct {
		info   nvml.GpuFabricInfo
		want   string
		usable bool
	}{
		{nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(nvml.SUCCESS)}, "Completed (Success)", true},
		{nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_IN_PROGRESS}, "In Progress", true},
		{nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_NOT_STARTED}, "Not Started", true},
		{nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_NOT_SUPPORTED}, "Not Supported", false},
	} {
		gpus, buses := switchBox(1, 18)
		gpus[0].fabric = c.info
		lib := newMockNVML(gpus)
		k, dev, err := nvmlDeviceByBusID(lib, "0000:10:00.0")
		require.NoError(t, err)
		require.Zero(t, k)
		st, err := nvmlFabricState(k, buses[0], dev)
		require.NoError(t, err)
		require.Equal(t, c.want, st.String())
		require.Equal(t, c.usable, st.Usable)
	}

	unsupported := &mock.Device{GetGpuFabricInfoFunc: func() (nvml.GpuFabricInfo, nvml.Return) {
		return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED
	}}
	st, err := nvmlFabricState(0, "0000:10:00.0", unsupported)
	require.NoError(t, err)
	require.False(t, st.Usable)
	require.Equal(t, "Not Supported", st.State)

	gpus, _ := switchBox(1, 18)
	gpus[0].broken = "GetGpuFabricInfo"
	_, dev, err := nvmlDeviceByBusID(newMockNVML(gpus), "0000:10:00.0")
	require.NoError(t, err)
	_, err = nvmlFabricState(0, "0000:10:00.0", dev)
	require.ErrorContains(t, err, "NVML device 0 (0000:10:00.0): GetGpuFabricInfo")

	_, _, err = nvmlDeviceByBusID(newMockNVML(gpus), "0000:99:00.0")
	require.True(t, errors.Is(err, backend.ErrNotFound))
}

// TestLinkMatrixReadOnce: the backend asks NVML once, hands every caller
// its own copy, and concurrent callers see the same matrix.
func TestLinkMatrixReadOnce(t *testing.T) {
	gpus := []mockGPU{
		{busID: "00000000:19:00.0", links: switchLinks(18)},
		{busID: "00000000:3B:00.0", links: switchLinks(18)},
	}
	lib := newMockNVML(gpus)
	var mu sync.Mutex
	reads := 0
	count := lib.DeviceGetCountFunc
	lib.DeviceGetCountFunc = func() (int, nvml.Return) {
		mu.Lock()
		reads++
		mu.Unlock()
		return count()
	}
	lib.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
	}
	infos := []backend.DeviceInfo{{Index: 0, PCIBusID: "0000:19:00.0"}, {Index: 1, PCIBusID: "0000:3b:00.0"}}
	b := &Backend{nvml: lib, devices: []deviceEntry{{info: infos[0]}, {info: infos[1]}}}
	b.Init(vendor{Runtime: driverRuntime(), b: b}, slog.Default(), nil, infos)
	want := [][]int{{0, 18}, {18, 0}}
	var wg sync.WaitGroup
	got := make([]connectivity.Matrix, 8)
	errs := make([]error, len(got))
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = b.LinkMatrix(t.Context())
		}()
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		require.Equal(t, want, got[i].Links)
	}
	require.Equal(t, 1, reads, "NVML read once")
	got[0].Links[0][1] = 0
	again, err := b.LinkMatrix(t.Context())
	require.NoError(t, err)
	require.Equal(t, want, again.Links, "a caller's copy is its own")
	require.Equal(t, 1, reads)
}
