package ipc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// MaxTagLen is the longest tag a message may carry, in bytes.
const MaxTagLen = 256

// Wire format of a message's payload (the descriptor travels beside it as
// SCM_RIGHTS): magic, version, the sender's pid as the sender names itself,
// the tag's length and the tag.
const (
	wireMagic   = "INFD"
	wireVersion = 1
	headerLen   = len(wireMagic) + 1 + 4 + 2
	// payloadBuf is larger than any valid payload so that an oversized one
	// shows up as MSG_TRUNC instead of passing as a valid prefix.
	payloadBuf = headerLen + MaxTagLen + 1
	// oobFDs is how many descriptors one receive makes room for. A valid
	// message carries one; room for more lets a bad message be read (and its
	// descriptors closed) whole. The kernel closes any beyond this itself and
	// flags MSG_CTRUNC.
	oobFDs = 16
)

// oobLen is the control buffer size: sender credentials plus oobFDs
// descriptors.
func oobLen() int { return unix.CmsgSpace(unix.SizeofUcred) + unix.CmsgSpace(4*oobFDs) }

// message is a received, well-formed message before the trust check.
type message struct {
	claimedPID int        // pid the sender names itself in the payload
	tag        string     // purpose/round chosen by the sender
	cred       unix.Ucred // credentials the kernel attached
	fds        []int      // descriptors carried, already installed here
}

// encodePayload builds the payload for a message from pid with tag.
func encodePayload(pid int, tag string) []byte {
	b := make([]byte, 0, headerLen+len(tag))
	b = append(b, wireMagic...)
	b = append(b, wireVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(pid))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(tag)))
	return append(b, tag...)
}

// decodePayload parses a payload built by encodePayload.
func decodePayload(b []byte) (pid int, tag string, err error) {
	if len(b) < headerLen {
		return 0, "", fmt.Errorf("payload of %d bytes is shorter than the %d-byte header", len(b), headerLen)
	}
	if string(b[:len(wireMagic)]) != wireMagic {
		return 0, "", errors.New("payload has no intranode magic")
	}
	if v := b[len(wireMagic)]; v != wireVersion {
		return 0, "", fmt.Errorf("payload version %d, want %d", v, wireVersion)
	}
	p := binary.LittleEndian.Uint32(b[len(wireMagic)+1:])
	n := int(binary.LittleEndian.Uint16(b[len(wireMagic)+5:]))
	if n > MaxTagLen || headerLen+n != len(b) {
		return 0, "", fmt.Errorf("payload of %d bytes does not hold a %d-byte tag", len(b), n)
	}
	if p == 0 || p > 1<<31-1 {
		return 0, "", fmt.Errorf("payload names invalid pid %d", p)
	}
	return int(p), string(b[headerLen:]), nil
}

// parseMessage takes apart one received datagram. It returns every
// descriptor found in oob even when it also returns an error, so that the
// caller can close them: a descriptor from a bad message must never leak.
func parseMessage(payload, oob []byte, flags int) (message, error) {
	var m message
	var credSeen bool
	var perr error
	for rest := oob; len(rest) > 0; {
		// x/sys reads a header before checking there is room for one.
		if len(rest) < unix.SizeofCmsghdr {
			perr = fmt.Errorf("malformed control data: %d stray bytes", len(rest))
			break
		}
		hdr, data, next, err := unix.ParseOneSocketControlMessage(rest)
		if err != nil {
			perr = fmt.Errorf("malformed control data: %w", err)
			break
		}
		rest = next
		if hdr.Level != unix.SOL_SOCKET {
			continue
		}
		scm := unix.SocketControlMessage{Header: hdr, Data: data}
		switch hdr.Type {
		case unix.SCM_RIGHTS:
			// Only whole descriptors can be closed; a ragged tail is itself
			// malformed.
			whole := len(data) &^ 3
			scm.Data = data[:whole]
			fds, err := unix.ParseUnixRights(&scm)
			m.fds = append(m.fds, fds...)
			if perr == nil && err != nil {
				perr = fmt.Errorf("malformed SCM_RIGHTS: %w", err)
			}
			if perr == nil && whole != len(data) {
				perr = fmt.Errorf("malformed SCM_RIGHTS: %d data bytes", len(data))
			}
		case unix.SCM_CREDENTIALS:
			// x/sys does not check the length before reading a Ucred.
			if len(data) != unix.SizeofUcred {
				if perr == nil {
					perr = fmt.Errorf("malformed SCM_CREDENTIALS: %d data bytes", len(data))
				}
				continue
			}
			cred, err := unix.ParseUnixCredentials(&scm)
			if err != nil {
				if perr == nil {
					perr = fmt.Errorf("malformed SCM_CREDENTIALS: %w", err)
				}
				continue
			}
			m.cred, credSeen = *cred, true
		}
	}
	switch {
	case perr != nil:
		return m, perr
	case flags&unix.MSG_CTRUNC != 0:
		return m, errors.New("control data truncated")
	case flags&unix.MSG_TRUNC != 0:
		return m, errors.New("payload truncated")
	case !credSeen:
		return m, errors.New("no sender credentials")
	case len(m.fds) != 1:
		return m, fmt.Errorf("carries %d descriptors, want 1", len(m.fds))
	}
	pid, tag, err := decodePayload(payload)
	if err != nil {
		return m, err
	}
	m.claimedPID, m.tag = pid, tag
	return m, nil
}

// closeFDs closes descriptors this package owns; errors are irrelevant since
// the descriptors are being discarded.
func closeFDs(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
}
