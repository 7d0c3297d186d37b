// Package connectivity describes how the devices of one host are linked and
// what a group of them can do together.
//
// A backend reports the host's links as a Matrix: Links[i][j] counts the
// links from device i to device j (NVLink lanes on CUDA, 1 per P2P-accessible
// pair on ROCm, emulated links on the fake). A group of ranks, rank r running
// on device devices[r], sees the links between its own devices through
// Matrix.Sub, and DetectGroup (or Detect on the restricted matrix) classifies
// them as a Topology:
//
//   - FullyConnected: every pair of the group is linked both ways, so every
//     rank can read every peer's buffer directly (one-shot and two-shot
//     all-reduce);
//   - HybridCubeMesh: the DGX-1 layout of 8 devices in two fully connected
//     quads joined by one link per device (HCMPeers gives each rank its quad
//     and its cross-quad neighbour for the HCM all-reduce);
//   - Unknown: anything else; collectives fall back to the vendor library.
//
// Setting TEST_INTRA_NODE_COMM=1 (EnvForceFullyConnected) makes DetectGroup
// report FullyConnected whatever the links are; it exists for tests.
//
// PeerCache remembers, per pair, whether a device can map a peer's memory,
// asking the backend once per pair and enabling access on the first yes.
//
// WriteTable and WritePeerTable print a matrix the way `nvidia-smi topo -m`
// does, for the `intranode topo` command; Matrix, Topology and Access also
// marshal to JSON for machine-readable reports.
package connectivity
