package connectivity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeBusID(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"00000000:19:00.0", "0000:19:00.0"}, // NVML
		{"0000:19:00.0", "0000:19:00.0"},     // CUDA
		{"0000:3B:00.0", "0000:3b:00.0"},
		{"00000000:3b:00.0\x00\x00", "0000:3b:00.0"},
		{"19:00.0", "0000:19:00.0"},
		{"0001:c1:1f.7", "0001:c1:1f.7"},
		{"10000:01:00.0", "10000:01:00.0"},
		{" 0000:19:00 ", "0000:19:00.0"},
		{"0000:C1:00.0", "0000:c1:00.0"}, // HIP
		{"0001:2A:03", "0001:2a:03.0"},
		{"0000:0c:00.0\x00", "0000:0c:00.0"},
	} {
		got, err := NormalizeBusID(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	for _, bad := range []string{"", "19", "zz:00.0", "0000:19:20.0", "0000:19:00.8", "0000:100:00.0", "a:b:c:d", "x:y:z"} {
		_, err := NormalizeBusID(bad)
		require.ErrorIs(t, err, ErrMalformedBusID, bad)
	}
}
