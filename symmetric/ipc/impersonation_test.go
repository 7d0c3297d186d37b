package ipc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
)

// Environment of the impersonator process.
const (
	envImpersonate = "INTRANODE_IPC_IMPERSONATE" // the pid to claim
	envImpTarget   = "INTRANODE_IPC_IMP_TARGET"  // the receiving pid
	envImpNonce    = "INTRANODE_IPC_IMP_NONCE"
)

// TestImpersonatorProcess is not a test: it is the body of the child of
// TestRejectsImpersonatedPeer. It opens a channel that names itself as a
// pid it is not (WithPID) and sends a descriptor under that name.
func TestImpersonatorProcess(t *testing.T) {
	claimed, err := strconv.Atoi(os.Getenv(envImpersonate))
	if err != nil {
		t.Skip("impersonator body; runs only when started by TestRejectsImpersonatedPeer")
	}
	err = func() error {
		target, err := strconv.Atoi(os.Getenv(envImpTarget))
		if err != nil {
			return err
		}
		ch, err := Listen(os.Getenv(envImpNonce), WithPID(claimed))
		if err != nil {
			return err
		}
		defer ch.Close()
		ch.SetPeers([]int{claimed, target})
		fd, err := helperMemfd("impersonator")
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
		defer cancel()
		return ch.SendFD(ctx, target, "t", fd)
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "impersonator (pid %d): %v\n", os.Getpid(), err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestRejectsImpersonatedPeer has a process outside the group claim, in
// its payload, the pid of a group member. The kernel's credentials give it
// away: the message is dropped, its descriptor closed (the descriptor count
// is unchanged), and nothing reaches a caller asking for the member's
// descriptor.
func TestRejectsImpersonatedPeer(t *testing.T) {
	nonce, err := NewNonce()
	require.NoError(t, err)
	drops := newDropLog()
	ch, err := Listen(nonce, WithLogger(drops.logger()))
	require.NoError(t, err)
	defer ch.Close()
	// The member whose pid is claimed has not bound its socket yet, so the
	// impersonator can take its name too; it may not take its identity.
	member := fakePIDBase + 5
	ch.SetPeers([]int{os.Getpid(), member})
	before := openFDs(t)

	cmd := exec.Command(os.Args[0], "-test.run=^TestImpersonatorProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envImpersonate+"="+strconv.Itoa(member),
		envImpTarget+"="+strconv.Itoa(os.Getpid()), envImpNonce+"="+nonce)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the kernel accepts the impersonator's message:\n%s", out)

	require.Contains(t, drops.next(t),
		fmt.Sprintf("payload claims pid %d but the kernel says pid %d", member, cmd.Process.Pid))
	require.Equal(t, before, openFDs(t), "the impersonator's descriptor was closed")
	_, err = ch.RecvFD(shortCtx(t), member, "t")
	require.ErrorIs(t, err, backend.ErrTimeout, "nothing from the impersonator reaches a caller")
}
