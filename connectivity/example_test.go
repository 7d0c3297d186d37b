package connectivity_test

import (
	"fmt"
	"os"

	"github.com/intranode/intranode/connectivity"
)

// dgx1 returns the link matrix of a DGX-1: two quads of four V100s, each
// quad fully connected, GPU i linked to GPU i+4 across.
func dgx1() connectivity.Matrix {
	m := connectivity.NewMatrix(connectivity.LinkNVLink, 8)
	link := func(i, j, n int) { m.Set(i, j, n); m.Set(j, i, n) }
	for _, quad := range [][4]int{{0, 1, 2, 3}, {4, 5, 6, 7}} {
		for a := range 4 {
			for b := a + 1; b < 4; b++ {
				link(quad[a], quad[b], 1)
			}
		}
	}
	for i := range 4 {
		link(i, i+4, 2)
	}
	return m
}

func ExampleDetect() {
	host := dgx1()
	fmt.Println("whole box:", connectivity.Detect(host))

	// A group sees its own devices, indexed by rank.
	for _, devices := range [][]int{{0, 1, 2, 3}, {5, 2}} {
		group, err := host.Sub(devices)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("devices %v: %s\n", devices, connectivity.Detect(group))
	}
	// Output:
	// whole box: HybridCubeMesh
	// devices [0 1 2 3]: FullyConnected
	// devices [5 2]: Unknown
}

func ExampleHCMPeers() {
	peers, err := connectivity.HCMPeers(dgx1())
	if err != nil {
		fmt.Println(err)
		return
	}
	for rank, p := range peers[:2] {
		fmt.Printf("rank %d: quad %v, across %d\n", rank, p[:3], p[3])
	}
	// Output:
	// rank 0: quad [1 2 3], across 4
	// rank 1: quad [0 2 3], across 5
}

func ExampleWriteTable() {
	m := connectivity.NewMatrix(connectivity.LinkNVLink, 3)
	m.Set(0, 1, 18)
	m.Set(1, 0, 18)
	err := connectivity.WriteTable(os.Stdout, m, connectivity.TableOptions{
		Columns: []connectivity.Column{{Header: "PCI Bus", Values: []string{"0000:18:00.0", "0000:2A:00.0", "0000:3A:00.0"}}},
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	//       GPU0  GPU1  GPU2  PCI Bus
	// GPU0  X     NV18  SYS   0000:18:00.0
	// GPU1  NV18  X     SYS   0000:2A:00.0
	// GPU2  SYS   SYS   X     0000:3A:00.0
	//
	// Legend:
	//
	//   X     = Self
	//   SYS   = No direct link: traffic crosses PCIe and the CPU interconnect
	//   NV#   = Connection traversing a bonded set of # NVLinks
}
