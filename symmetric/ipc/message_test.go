package ipc

import (
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestPayloadRoundTrip(t *testing.T) {
	tests := []struct {
		pid int
		tag string
	}{
		{1, ""},
		{os.Getpid(), "symm"},
		{1<<31 - 1, strings.Repeat("x", MaxTagLen)},
	}
	for _, tt := range tests {
		pid, tag, err := decodePayload(encodePayload(tt.pid, tt.tag))
		require.NoError(t, err)
		require.Equal(t, tt.pid, pid)
		require.Equal(t, tt.tag, tag)
	}
}

func TestDecodePayloadRejects(t *testing.T) {
	good := encodePayload(42, "tag")
	with := func(i int, b byte) []byte {
		p := append([]byte(nil), good...)
		p[i] = b
		return p
	}
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"empty", nil, "shorter than"},
		{"bad magic", with(0, 'X'), "magic"},
		{"bad version", with(4, 9), "version"},
		{"zero pid", encodePayload(0, "tag"), "invalid pid"},
		{"tag longer than payload", with(9, 200), "does not hold"},
		{"trailing bytes", append(append([]byte(nil), good...), 'z'), "does not hold"},
		{"tag over limit", encodePayload(42, strings.Repeat("x", MaxTagLen+1)), "does not hold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodePayload(tt.payload)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestParseMessage feeds parseMessage control data built by hand around real
// descriptors, and checks that every descriptor comes back — with an error
// or not — so that the caller can close it.
func TestParseMessage(t *testing.T) {
	cred := unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	payload := encodePayload(os.Getpid(), "t")
	setLen := func(oob []byte, n int) []byte {
		(*unix.Cmsghdr)(unsafe.Pointer(&oob[0])).SetLen(unix.CmsgLen(n))
		return oob
	}
	tests := []struct {
		name    string
		nfds    int
		oob     func(fds []int) []byte
		payload []byte
		flags   int
		want    string // error substring; empty for success
	}{
		{"valid", 1, func(f []int) []byte { return slices.Concat(cred, unix.UnixRights(f...)) }, payload, 0, ""},
		{"rights before credentials", 1, func(f []int) []byte { return slices.Concat(unix.UnixRights(f...), cred) }, payload, 0, ""},
		{"no credentials", 1, func(f []int) []byte { return unix.UnixRights(f...) }, payload, 0, "no sender credentials"},
		{"no descriptor", 0, func([]int) []byte { return cred }, payload, 0, "carries 0 descriptors"},
		{"three descriptors", 3, func(f []int) []byte { return slices.Concat(cred, unix.UnixRights(f...)) }, payload, 0, "carries 3 descriptors"},
		{"descriptors in two messages", 2, func(f []int) []byte {
			return slices.Concat(cred, unix.UnixRights(f[0]), unix.UnixRights(f[1]))
		}, payload, 0, "carries 2 descriptors"},
		{"trailing garbage", 1, func(f []int) []byte {
			return slices.Concat(cred, unix.UnixRights(f...), []byte{1, 2, 3})
		}, payload, 0, "malformed control data"},
		{"ragged rights", 1, func(f []int) []byte {
			return slices.Concat(cred, setLen(unix.UnixRights(f...), 5))
		}, payload, 0, "malformed SCM_RIGHTS"},
		{"short credentials", 1, func(f []int) []byte {
			return slices.Concat(setLen(slices.Clone(cred), 4)[:unix.CmsgSpace(4)], unix.UnixRights(f...))
		}, payload, 0, "malformed SCM_CREDENTIALS"},
		{"control truncated", 1, func(f []int) []byte { return slices.Concat(cred, unix.UnixRights(f...)) }, payload, unix.MSG_CTRUNC, "control data truncated"},
		{"payload truncated", 1, func(f []int) []byte { return slices.Concat(cred, unix.UnixRights(f...)) }, payload, unix.MSG_TRUNC, "payload truncated"},
		{"bad payload", 1, func(f []int) []byte { return slices.Concat(cred, unix.UnixRights(f...)) }, []byte("nonsense payload"), 0, "magic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds := make([]int, tt.nfds)
			for i := range fds {
				fds[i] = memfdWith(t, "x")
			}
			defer closeFDs(fds)
			oob := tt.oob(fds)
			m, err := parseMessage(tt.payload, oob, tt.flags)
			require.ElementsMatch(t, fds, m.fds, "every descriptor is returned to be closed")
			if tt.want != "" {
				require.ErrorContains(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			require.Equal(t, os.Getpid(), m.claimedPID)
			require.Equal(t, "t", m.tag)
			require.Equal(t, int32(os.Getpid()), m.cred.Pid)
			require.Equal(t, uint32(os.Getuid()), m.cred.Uid)
		})
	}
}
