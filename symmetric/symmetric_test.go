package symmetric

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric/store"
)

func TestGroupRegistry(t *testing.T) {
	st := store.NewMem()
	defer st.Close()
	require.NoError(t, SetGroupInfo("g", 0, 2, st))
	require.NoError(t, SetGroupInfo("g", 0, 2, st), "repeating identical values is fine")
	require.NoError(t, SetGroupInfo("g", 1, 2, st), "another rank of the same group in this process")
	require.Error(t, SetGroupInfo("g", 0, 4, st))
	require.Error(t, SetGroupInfo("", 0, 2, st))
	require.Error(t, SetGroupInfo("h", 2, 2, st))
	require.Error(t, SetGroupInfo("h", 0, 2, nil))
	g, ok := LookupGroup("g", 1)
	require.True(t, ok)
	require.Equal(t, 2, g.World)
	ForgetGroup("g", 0)
	ForgetGroup("g", 1)
	_, ok = LookupGroup("g", 1)
	require.False(t, ok)
}

func TestValidatePeers(t *testing.T) {
	ok := []peerInfo{{Host: "a", Device: 0, Size: 8, Span: 256}, {Host: "a", Device: 1, Size: 8, Span: 256}}
	require.NoError(t, validatePeers(ok, false))
	for _, tc := range []struct {
		name  string
		edit  func(p []peerInfo)
		allow bool
		want  error
	}{
		{"host", func(p []peerInfo) { p[1].Host = "b" }, false, ErrHostMismatch},
		{"size", func(p []peerInfo) { p[1].Size = 16 }, false, ErrSizeMismatch},
		{"overlap", func(p []peerInfo) { p[1].Device = 0 }, false, ErrOverlappingDevices},
		{"overlap allowed", func(p []peerInfo) { p[1].Device = 0 }, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := append([]peerInfo(nil), ok...)
			tc.edit(p)
			err := validatePeers(p, tc.allow)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestStatusError(t *testing.T) {
	word := make([]byte, 8)
	require.NoError(t, StatusError(word, "op"))
	word[0] = byte(kernels.StatusTimeout)
	word[1] = 3
	word[2] = 7
	err := StatusError(word, "barrier")
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "rank 3")
	require.ErrorContains(t, err, "channel 7")
	require.NoError(t, StatusError(word, "op"), "reading clears the word")
	word[0] = byte(kernels.StatusBadArgs)
	require.ErrorIs(t, StatusError(word, "op"), backend.ErrInvalidArgument)

	// SetClosed marks a clear word closed, and leaves a recorded failure.
	SetClosed(word)
	require.ErrorIs(t, StatusError(word, "op"), backend.ErrClosed)
	word[0] = byte(kernels.StatusTimeout)
	SetClosed(word)
	require.ErrorIs(t, StatusError(word, "op"), backend.ErrTimeout, "a kernel's own account stays")
}

func TestTimeoutFor(t *testing.T) {
	require.Equal(t, time.Minute, TimeoutFor(context.Background(), time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := TimeoutFor(ctx, time.Minute)
	require.LessOrEqual(t, got, 10*time.Second)
	require.Greater(t, got, 5*time.Second)
	done, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	require.Equal(t, time.Millisecond, TimeoutFor(done, time.Minute))
}
