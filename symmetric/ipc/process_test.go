package ipc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
)

// Environment switches of the helper process. The test binary re-runs
// itself with -test.run=^TestHelperProcess$ and these set.
const (
	envRole    = "INTRANODE_IPC_HELPER" // "group" or "send"
	envNonce   = "INTRANODE_IPC_NONCE"
	envRank    = "INTRANODE_IPC_RANK"    // group: this process's rank
	envRoot    = "INTRANODE_IPC_ROOT"    // group: the broadcast root
	envTarget  = "INTRANODE_IPC_TARGET"  // send: the receiving pid
	envTag     = "INTRANODE_IPC_TAG"     // send: the tag
	envContent = "INTRANODE_IPC_CONTENT" // send: what the memfd holds
	envGate    = "INTRANODE_IPC_GATE"    // send: "1" waits for a line on stdin before sending
)

// helperTimeout bounds every step of a helper so a broken test ends.
const helperTimeout = 20 * time.Second

// TestHelperProcess is not a test: it is the body of the child processes
// the multi-process tests start.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("helper process body; runs only when started by another test")
	}
	var err error
	switch role {
	case "group":
		err = helperGroup()
	case "send":
		err = helperSend()
	default:
		err = fmt.Errorf("unknown helper role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper %s (pid %d): %v\n", role, os.Getpid(), err)
		os.Exit(1)
	}
	fmt.Println("ok")
	os.Exit(0)
}

// helperGroup is one rank of a group: it reads the group's pids from stdin,
// all-gathers a memfd holding "rank <r>" and checks every peer's through
// mmap, then takes part in a broadcast from the root.
func helperGroup() error {
	nonce := os.Getenv(envNonce)
	rank, err := strconv.Atoi(os.Getenv(envRank))
	if err != nil {
		return err
	}
	root, err := strconv.Atoi(os.Getenv(envRoot))
	if err != nil {
		return err
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading pids: %w", err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		p, err := strconv.Atoi(f)
		if err != nil {
			return err
		}
		pids = append(pids, p)
	}
	if pids[rank] != os.Getpid() {
		return fmt.Errorf("rank %d is pid %d, not %d", rank, pids[rank], os.Getpid())
	}
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()

	ch, err := Listen(nonce)
	if err != nil {
		return err
	}
	defer ch.Close()
	ch.SetPeers(pids)

	own, err := helperMemfd(fmt.Sprintf("rank %d", rank))
	if err != nil {
		return err
	}
	defer unix.Close(own)
	fds, err := ch.AllGatherFD(ctx, rank, pids, "ag", own)
	if err != nil {
		return err
	}
	if fds[rank] != own {
		return fmt.Errorf("own entry is %d, want %d", fds[rank], own)
	}
	for r, fd := range fds {
		if err := helperCheck(fd, fmt.Sprintf("rank %d", r)); err != nil {
			return fmt.Errorf("descriptor of rank %d: %w", r, err)
		}
		if r != rank {
			if err := unix.Close(fd); err != nil {
				return err
			}
		}
	}

	send := -1
	if rank == root {
		send = own
	}
	got, err := ch.BroadcastFD(ctx, rank, root, pids, "bc", send)
	if err != nil {
		return err
	}
	if err := helperCheck(got, fmt.Sprintf("rank %d", root)); err != nil {
		return fmt.Errorf("broadcast descriptor: %w", err)
	}
	if rank != root {
		return unix.Close(got)
	}
	return nil
}

// helperSend sends one memfd to a target pid, as a well-behaved group
// member would; whether the target accepts it is up to the target.
func helperSend() error {
	target, err := strconv.Atoi(os.Getenv(envTarget))
	if err != nil {
		return err
	}
	ch, err := Listen(os.Getenv(envNonce))
	if err != nil {
		return err
	}
	defer ch.Close()
	ch.SetPeers([]int{os.Getpid(), target})
	fd, err := helperMemfd(os.Getenv(envContent))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if os.Getenv(envGate) == "1" {
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("waiting for the go-ahead: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	return ch.SendFD(ctx, target, os.Getenv(envTag), fd)
}

func helperMemfd(content string) (int, error) {
	fd, err := unix.MemfdCreate("ipc-helper", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, err
	}
	if _, err := unix.Pwrite(fd, []byte(content), 0); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// helperCheck maps fd, as symmetric memory would, and compares its bytes.
func helperCheck(fd int, want string) error {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		return err
	}
	if flags&unix.FD_CLOEXEC == 0 {
		return errors.New("descriptor is not close-on-exec")
	}
	mem, err := unix.Mmap(fd, 0, len(want), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(mem)
	if got := string(mem); got != want {
		return fmt.Errorf("holds %q, want %q", got, want)
	}
	return nil
}

// helper is one started child process.
type helper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	output bytes.Buffer
}

// helperCmd builds a child running this test binary (or bin, when set) in
// role with extra environment.
func helperCmd(t *testing.T, bin, role string, env ...string) *helper {
	t.Helper()
	if bin == "" {
		bin = os.Args[0]
	}
	h := &helper{cmd: exec.Command(bin, "-test.run=^TestHelperProcess$", "-test.count=1")}
	h.cmd.Env = append(os.Environ(), append([]string{envRole + "=" + role}, env...)...)
	h.cmd.Stdout = &h.output
	h.cmd.Stderr = &h.output
	return h
}

// start starts the child with a pipe on its stdin.
func (h *helper) start(t *testing.T) {
	t.Helper()
	var err error
	h.stdin, err = h.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, h.cmd.Start())
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
	})
}

// wait waits for the child and requires it to have succeeded.
func (h *helper) wait(t *testing.T) {
	t.Helper()
	_ = h.stdin.Close()
	err := h.cmd.Wait()
	require.NoError(t, err, "child %d failed:\n%s", h.cmd.Process.Pid, h.output.String())
	require.Contains(t, h.output.String(), "ok")
}

func TestMultiProcessAllGatherAndBroadcast(t *testing.T) {
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d processes", world), func(t *testing.T) {
			nonce, err := NewNonce()
			require.NoError(t, err)
			root := world - 1
			helpers := make([]*helper, world)
			pids := make([]string, world)
			for r := range helpers {
				helpers[r] = helperCmd(t, "", "group", envNonce+"="+nonce,
					envRank+"="+strconv.Itoa(r), envRoot+"="+strconv.Itoa(root))
				helpers[r].start(t)
				pids[r] = strconv.Itoa(helpers[r].cmd.Process.Pid)
			}
			line := strings.Join(pids, " ") + "\n"
			for _, h := range helpers {
				_, err := io.WriteString(h.stdin, line)
				require.NoError(t, err)
			}
			for _, h := range helpers {
				h.wait(t)
			}
		})
	}
}

// TestRejectsSenderOutsideGroup has a process that is not in the peer set
// send a descriptor: the kernel delivers it, the channel closes it and logs
// why, and a legitimate peer's descriptor still arrives afterwards.
func TestRejectsSenderOutsideGroup(t *testing.T) {
	nonce, err := NewNonce()
	require.NoError(t, err)
	drops := newDropLog()
	ch, err := Listen(nonce, WithLogger(drops.logger()))
	require.NoError(t, err)
	defer ch.Close()

	legit := helperCmd(t, "", "send", envNonce+"="+nonce, envTarget+"="+strconv.Itoa(os.Getpid()),
		envTag+"=t", envContent+"=legit", envGate+"=1")
	legit.start(t)
	legitPID := legit.cmd.Process.Pid
	ch.SetPeers([]int{os.Getpid(), legitPID})
	before := openFDs(t)

	intruder := helperCmd(t, "", "send", envNonce+"="+nonce, envTarget+"="+strconv.Itoa(os.Getpid()),
		envTag+"=t", envContent+"=intruder")
	intruder.cmd.Stdout, intruder.cmd.Stderr = nil, nil
	out, err := intruder.cmd.CombinedOutput()
	require.NoError(t, err, "the kernel accepts the intruder's message:\n%s", out)

	require.Contains(t, drops.next(t), fmt.Sprintf("pid %d is not a peer", intruder.cmd.Process.Pid))
	require.Equal(t, before, openFDs(t), "the intruder's descriptor was closed")

	_, err = io.WriteString(legit.stdin, "go\n")
	require.NoError(t, err)
	fd, err := ch.RecvFD(testCtx(t), legitPID, "t")
	require.NoError(t, err)
	require.Equal(t, "legit", readFD(t, fd))
	require.NoError(t, unix.Close(fd))
	legit.wait(t)
}

// TestRejectsForeignUser has a child running as another user, listed as a
// peer, send a descriptor: the uid check alone must reject it.
func TestRejectsForeignUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a child as another user (uid 65534)")
	}
	const nobody = 65534
	// The test binary sits in a directory only its owner may enter; give
	// the child a copy it can execute.
	dir, err := os.MkdirTemp("", "intranode-ipc-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "ipc.test")
	data, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))

	nonce, err := NewNonce()
	require.NoError(t, err)
	drops := newDropLog()
	ch, err := Listen(nonce, WithLogger(drops.logger()))
	require.NoError(t, err)
	defer ch.Close()

	foreign := helperCmd(t, bin, "send", envNonce+"="+nonce, envTarget+"="+strconv.Itoa(os.Getpid()),
		envTag+"=t", envContent+"=foreign")
	foreign.cmd.Dir = dir
	foreign.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	foreign.start(t)
	foreignPID := foreign.cmd.Process.Pid
	// The child's message waits in the kernel until SetPeers starts
	// receiving, so the count is taken with the child gone and nothing
	// received yet.
	foreign.wait(t)
	before := openFDs(t)
	ch.SetPeers([]int{os.Getpid(), foreignPID})

	require.Contains(t, drops.next(t), fmt.Sprintf("sender uid %d differs", nobody))
	require.Equal(t, before, openFDs(t), "the foreign user's descriptor was closed")
	_, err = ch.RecvFD(shortCtx(t), foreignPID, "t")
	require.ErrorIs(t, err, backend.ErrTimeout, "nothing from the foreign user reaches a caller")
}
