package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/symmetric/ipc"
)

// TestStaleSockets: a rank's bound IPC socket is found by its pid until
// it is closed.
func TestStaleSockets(t *testing.T) {
	nonce, err := ipc.NewNonce()
	require.NoError(t, err)
	ch, err := ipc.Listen(nonce)
	require.NoError(t, err)
	me := os.Getpid()
	require.Equal(t, []string{ch.Name()}, staleSockets([]int{0, me}))
	require.Empty(t, staleSockets([]int{me + 1}))
	require.NoError(t, ch.Close())
	require.Empty(t, staleSockets([]int{me}))
}
