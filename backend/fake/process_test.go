//go:build linux

package fake_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/internal/launch"
)

// The helper process is this test binary run again with helperEnv set.
const (
	helperEnv       = "INTRANODE_FAKE_TEST_HELPER" // "fd" or "fabric"
	helperSizeEnv   = "INTRANODE_FAKE_TEST_SIZE"
	helperHandleEnv = "INTRANODE_FAKE_TEST_HANDLE" // fabric: hex opaque bytes

	// Descriptors of the helper: parent→child pipe, child→parent pipe, and
	// in fd mode the exported memory.
	helperInFD  = 3
	helperOutFD = 4
	helperMemFD = 5

	// Offsets of the three messages in the shared memory.
	offParent1 = 0
	offChild   = 4096
	offParent2 = 8192

	pipeDeadline = 60 * time.Second
)

func helperMessages() (parent1, child, parent2 []byte) {
	return []byte("written by the parent before the child mapped it"),
		[]byte("written by the child into the parent's memory"),
		[]byte("written by the parent while the child has it mapped")
}

// handleKinds runs f for each kind of shareable handle, on a fake of
// devices devices (fabric handles on when the kind asks), skipping the
// fabric kind where this machine cannot pass them (checked on device dev).
func handleKinds(t *testing.T, devices, dev int, f func(t *testing.T, e *env, name string, kind backend.HandleKind)) {
	tests := []struct {
		name string
		kind backend.HandleKind
		opts []fake.Option
	}{
		{"fd", backend.HandleFD, nil},
		{"fabric", backend.HandleFabric, []fake.Option{fake.WithFabric(true)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, append([]fake.Option{fake.WithDevices(devices)}, tc.opts...)...)
			if tc.kind == backend.HandleFabric {
				ok, err := e.b.FabricSupported(e.ctx, dev)
				require.NoError(t, err)
				if !ok {
					t.Skip("fabric round trip fails here (no access to /proc/<pid>/fd)")
				}
			}
			f(t, e, tc.name, tc.kind)
		})
	}
}

func TestExportImportOtherProcess(t *testing.T) {
	handleKinds(t, 1, 0, func(t *testing.T, e *env, name string, kind backend.HandleKind) {
		parent1, child, parent2 := helperMessages()
		a, err := e.d.AllocShareable(e.ctx, 3*4096, kind)
		require.NoError(t, err)
		defer func() { require.NoError(t, a.Close()) }()
		require.NoError(t, e.d.CopyToDevice(e.ctx, a.Ptr().Add(offParent1), parent1))
		h, err := a.Export(kind)
		require.NoError(t, err)
		require.Equal(t, a.Size(), h.Size)

		ctx, cancel := context.WithTimeout(e.ctx, 2*pipeDeadline)
		defer cancel()
		toChildR, toChildW, err := os.Pipe()
		require.NoError(t, err)
		fromChildR, fromChildW, err := os.Pipe()
		require.NoError(t, err)
		defer toChildW.Close()
		defer fromChildR.Close()

		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+name, helperSizeEnv+"="+strconv.Itoa(h.Size))
		cmd.ExtraFiles = []*os.File{toChildR, fromChildW}
		if kind == backend.HandleFD {
			cmd.ExtraFiles = append(cmd.ExtraFiles, h.File)
		} else {
			cmd.Env = append(cmd.Env, helperHandleEnv+"="+hex.EncodeToString(h.Opaque))
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		// The child holds its own copies now.
		require.NoError(t, toChildR.Close())
		require.NoError(t, fromChildW.Close())
		if h.File != nil {
			require.NoError(t, h.File.Close())
		}

		lines := bufio.NewReader(fromChildR)
		readLine := func() string {
			require.NoError(t, fromChildR.SetReadDeadline(time.Now().Add(pipeDeadline)))
			l, err := lines.ReadString('\n')
			require.NoError(t, err, "child output:\n%s", &out)
			return strings.TrimSpace(l)
		}

		require.Equal(t, "written", readLine())
		got := make([]byte, len(child))
		require.NoError(t, e.d.CopyFromDevice(e.ctx, got, a.Ptr().Add(offChild)))
		require.Equal(t, string(child), string(got), "the child's write is visible here")

		require.NoError(t, e.d.CopyToDevice(e.ctx, a.Ptr().Add(offParent2), parent2))
		require.NoError(t, toChildW.SetWriteDeadline(time.Now().Add(pipeDeadline)))
		_, err = toChildW.WriteString("again\n")
		require.NoError(t, err)
		require.Equal(t, "ok", readLine())
		require.NoError(t, cmd.Wait(), "child output:\n%s", &out)
	})
}

// TestHelperProcess is the child of TestExportImportOtherProcess; it does
// nothing in a normal run.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	if err := runHelper(t.Context(), mode); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// pipeFile makes an inherited pipe pollable so deadlines work on it.
func pipeFile(fd int, name string) (*os.File, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func runHelper(ctx context.Context, mode string) error {
	in, err := pipeFile(helperInFD, "from-parent")
	if err != nil {
		return err
	}
	out, err := pipeFile(helperOutFD, "to-parent")
	if err != nil {
		return err
	}
	size, err := strconv.Atoi(os.Getenv(helperSizeEnv))
	if err != nil {
		return err
	}
	h := backend.Handle{Size: size}
	switch mode {
	case "fd":
		h.Kind, h.File = backend.HandleFD, os.NewFile(helperMemFD, "memory")
	case "fabric":
		h.Kind = backend.HandleFabric
		if h.Opaque, err = hex.DecodeString(os.Getenv(helperHandleEnv)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}

	b, err := fake.New(fake.WithDevices(1), fake.WithFabric(mode == "fabric"))
	if err != nil {
		return err
	}
	d, err := b.Open(ctx, 0)
	if err != nil {
		return err
	}
	a, err := d.Import(ctx, h)
	if err != nil {
		return err
	}
	if h.File != nil {
		_ = h.File.Close() // Import does not take ownership
	}
	parent1, child, parent2 := helperMessages()
	expect := func(off int, want []byte) error {
		got := make([]byte, len(want))
		if err := d.CopyFromDevice(ctx, got, a.Ptr().Add(off)); err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("at offset %d read %q, want %q", off, got, want)
		}
		return nil
	}
	if err := expect(offParent1, parent1); err != nil {
		return err
	}
	if err := d.CopyToDevice(ctx, a.Ptr().Add(offChild), child); err != nil {
		return err
	}
	send := func(s string) error {
		if err := out.SetWriteDeadline(time.Now().Add(pipeDeadline)); err != nil {
			return err
		}
		_, err := out.WriteString(s + "\n")
		return err
	}
	if err := send("written"); err != nil {
		return err
	}
	if err := in.SetReadDeadline(time.Now().Add(pipeDeadline)); err != nil {
		return err
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "again" {
		return fmt.Errorf("parent said %q", line)
	}
	if err := expect(offParent2, parent2); err != nil {
		return err
	}
	return errors.Join(a.Close(), d.Close(), b.Close(), send("ok"))
}

func TestImportSameProcess(t *testing.T) {
	handleKinds(t, 2, 1, func(t *testing.T, e *env, name string, kind backend.HandleKind) {
		a, err := e.d.AllocShareable(e.ctx, 100, kind)
		require.NoError(t, err)
		require.Equal(t, e.d.Granularity(), a.Size(), "rounded up to the granularity")
		h, err := a.Export(kind)
		require.NoError(t, err)
		if h.File != nil {
			defer h.File.Close()
		}

		d1, err := e.b.Open(e.ctx, 1)
		require.NoError(t, err)
		defer func() { require.NoError(t, d1.Close()) }()
		imp, err := d1.Import(e.ctx, h)
		require.NoError(t, err)
		require.NotEqual(t, a.Ptr(), imp.Ptr(), "a second mapping of the same memory")
		require.Equal(t, a.Size(), imp.Size())
		_, err = imp.Export(backend.HandleFD)
		require.ErrorIs(t, err, backend.ErrNotSupported, "imports are not re-exported")

		require.NoError(t, d1.CopyToDevice(e.ctx, imp.Ptr().Add(10), []byte("via import")))
		got := make([]byte, 10)
		require.NoError(t, e.d.CopyFromDevice(e.ctx, got, a.Ptr().Add(10)))
		require.Equal(t, "via import", string(got))
		require.NoError(t, e.d.CopyToDevice(e.ctx, a.Ptr(), []byte("via owner!")))
		require.NoError(t, d1.CopyFromDevice(e.ctx, got, imp.Ptr()))
		require.Equal(t, "via owner!", string(got))

		// The import outlives the exporter's allocation.
		require.NoError(t, a.Close())
		require.NoError(t, d1.CopyFromDevice(e.ctx, got, imp.Ptr().Add(10)))
		require.Equal(t, "via import", string(got))
		require.NoError(t, imp.Close())
		if kind == backend.HandleFabric {
			_, err := d1.Import(e.ctx, h)
			require.ErrorIs(t, err, backend.ErrNotFound, "fabric handle of a freed allocation")
		}
	})
}

func TestImportErrors(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1), fake.WithFabric(true))
	a, err := e.d.AllocShareable(e.ctx, 4096, backend.HandleFD)
	require.NoError(t, err)
	defer a.Close()
	h, err := a.Export(backend.HandleFD)
	require.NoError(t, err)
	defer h.File.Close()
	tests := []struct {
		name string
		h    backend.Handle
		want error
		msg  string
	}{
		{"size mismatch", backend.Handle{Kind: backend.HandleFD, File: h.File, Size: 8192}, backend.ErrInvalidArgument, "holds 4096"},
		{"zero size", backend.Handle{Kind: backend.HandleFD, File: h.File}, backend.ErrInvalidArgument, "size 0"},
		{"no file", backend.Handle{Kind: backend.HandleFD, Size: 4096}, backend.ErrInvalidArgument, "without a file"},
		{"no kind", backend.Handle{Size: 4096}, backend.ErrInvalidArgument, "none handle"},
		{"garbage fabric", backend.Handle{Kind: backend.HandleFabric, Opaque: []byte("nope"), Size: 4096}, backend.ErrInvalidArgument, "not a fake fabric handle"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.d.Import(e.ctx, tc.h)
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

// TestMain keeps the helper processes this package starts from sleeping a
// second at exit in race builds.
func TestMain(m *testing.M) {
	launch.QuietRaceExit()
	os.Exit(m.Run())
}
