package backend

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseCCLCreation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want CCLCreation
		err  bool
	}{
		{"guarded", CCLGuarded, false},
		{"blocking", CCLBlocking, false},
		{"nonblocking", CCLNonBlocking, false},
		{"", 0, true},
		{"Blocking", 0, true},
		{"1", 0, true},
	} {
		got, err := ParseCCLCreation(tc.in)
		if tc.err {
			require.ErrorIs(t, err, ErrInvalidArgument, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
		require.Equal(t, tc.in, got.String(), "String names what Parse reads")
	}
	require.Equal(t, "CCLCreation(7)", CCLCreation(7).String())
}
