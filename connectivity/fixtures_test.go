package connectivity

// Link matrices of real and made-up hosts shared by the tests.

// fromRows builds a matrix from literal rows.
func fromRows(kind LinkKind, rows [][]int) Matrix {
	m := NewMatrix(kind, len(rows))
	for i, row := range rows {
		copy(m.Links[i], row)
	}
	return m
}

// dgx1 is a DGX-1 (V100) as `nvidia-smi topo -m` shows it: quads {0,1,2,3}
// and {4,5,6,7}, cross links 0-4, 1-5, 2-6, 3-7, six NVLinks per GPU.
func dgx1() Matrix {
	return fromRows(LinkNVLink, [][]int{
		{0, 1, 1, 2, 2, 0, 0, 0},
		{1, 0, 2, 1, 0, 2, 0, 0},
		{1, 2, 0, 2, 0, 0, 1, 0},
		{2, 1, 2, 0, 0, 0, 0, 1},
		{2, 0, 0, 0, 0, 1, 1, 2},
		{0, 2, 0, 0, 1, 0, 2, 1},
		{0, 0, 1, 0, 1, 2, 0, 2},
		{0, 0, 0, 1, 2, 1, 2, 0},
	})
}

// dgx1Peers is HCMPeers(dgx1()).
var dgx1Peers = [][4]int{
	{1, 2, 3, 4}, {0, 2, 3, 5}, {0, 1, 3, 6}, {0, 1, 2, 7},
	{5, 6, 7, 0}, {4, 6, 7, 1}, {4, 5, 7, 2}, {4, 5, 6, 3},
}

// nvswitch is n GPUs behind NVSwitches: every pair reads `links` NVLinks.
func nvswitch(n, links int) Matrix {
	m := NewMatrix(LinkNVLink, n)
	for i := range n {
		for j := range n {
			if i != j {
				m.Set(i, j, links)
			}
		}
	}
	return m
}

// withLink returns a copy of m with n links set both ways between i and j.
func withLink(m Matrix, i, j, n int) Matrix {
	out := m.Clone()
	out.Set(i, j, n)
	out.Set(j, i, n)
	return out
}

// ring4 is a 4-GPU partial mesh: 0-1-2-3-0, no diagonals.
func ring4() Matrix {
	return fromRows(LinkNVLink, [][]int{
		{0, 2, 0, 2},
		{2, 0, 2, 0},
		{0, 2, 0, 2},
		{2, 0, 2, 0},
	})
}

// circulant8 links every device to the four at distance 1 and 2 around a
// ring: 8 devices of degree 4 that do not split into two quads.
func circulant8() Matrix {
	m := NewMatrix(LinkNVLink, 8)
	for i := range 8 {
		for _, d := range []int{1, 2, 6, 7} {
			m.Set(i, (i+d)%8, 1)
		}
	}
	return m
}

// cube is a plain 3-cube: 8 devices of degree 3.
func cube() Matrix {
	m := NewMatrix(LinkNVLink, 8)
	for i := range 8 {
		for _, bit := range []int{1, 2, 4} {
			m.Set(i, i^bit, 1)
		}
	}
	return m
}
