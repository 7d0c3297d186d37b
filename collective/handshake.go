package collective

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"

	"github.com/intranode/intranode/connectivity"
)

// hostLen bounds host names in the handshake (HOST_NAME_MAX is 64).
const hostLen = 64

// nsLen bounds the PID namespace's name ("pid:[4026531836]").
const nsLen = 32

// handshakeWire is the fixed-size record ranks all-gather first.
type handshakeWire struct {
	Host         [hostLen]byte
	Device       int32
	Topology     uint64
	PID          int32
	PIDNamespace [nsLen]byte
}

func encodeHandshake(h handshake) handshakeWire {
	var w handshakeWire
	copy(w.Host[:], h.Host)
	w.Device = int32(h.Device)
	w.Topology = h.Topology
	w.PID = int32(h.PID)
	copy(w.PIDNamespace[:], h.PIDNamespace)
	return w
}

// cString is b up to its first zero byte.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func decodeHandshake(w handshakeWire) handshake {
	return handshake{Host: cString(w.Host[:]), Device: int(w.Device), Topology: w.Topology, PID: int(w.PID),
		PIDNamespace: cString(w.PIDNamespace[:])}
}

// topologyDigest fingerprints what a rank judges the group's topology
// from: the host's link matrix and whether TEST_INTRA_NODE_COMM forces a
// fully connected verdict. Ranks that agree on it reach the same verdict
// for the same devices; the handshake compares it, so a rank that would
// judge differently fails every rank at once instead of leaving its peers
// to wait for it.
func topologyDigest(m connectivity.Matrix, forced bool) uint64 {
	h := fnv.New64a()
	var b [8]byte
	put := func(v int) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	h.Write([]byte(m.Kind))
	put(len(m.Links))
	for _, row := range m.Links {
		put(len(row))
		for _, v := range row {
			put(v)
		}
	}
	if forced {
		put(1)
	}
	return h.Sum64() | 1 // never 0
}
