package collective

import "bytes"

// hostLen bounds host names in the handshake (HOST_NAME_MAX is 64).
const hostLen = 64

// handshakeWire is the fixed-size record ranks all-gather first.
type handshakeWire struct {
	Host   [hostLen]byte
	Device int32
}

func encodeHandshake(h handshake) handshakeWire {
	var w handshakeWire
	copy(w.Host[:], h.Host)
	w.Device = int32(h.Device)
	return w
}

func decodeHandshake(w handshakeWire) handshake {
	host := w.Host[:]
	if i := bytes.IndexByte(host, 0); i >= 0 {
		host = host[:i]
	}
	return handshake{Host: string(host), Device: int(w.Device)}
}
