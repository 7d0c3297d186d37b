//go:build linux

package plugin_test

import (
	"context"
	"encoding/binary"
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
	"github.com/intranode/intranode/backend/plugin"
	"github.com/intranode/intranode/conformance"
	"github.com/intranode/intranode/kernels"
)

// openPlugin starts the fake plugin with n devices for the test.
func openPlugin(t testing.TB, n int) *plugin.Backend {
	t.Helper()
	bin := pluginBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, err := plugin.Open(ctx, bin, plugin.WithArgs("devices="+strconv.Itoa(n)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestConformanceProcesses runs the suite through real plugin processes:
// every rank is a separate process that starts its own plugin, and shared
// memory travels rank → host → descriptor socket → plugin.
func TestConformanceProcesses(t *testing.T) {
	t.Parallel() // mostly waiting on round trips: overlapped with the loopback's run
	bin := pluginBinary(t)
	conformance.RunTests(t, conformance.Config{Backend: plugin.Name + ":" + bin, Mode: conformance.Processes,
		Worlds: []int{2}, Quick: true, ChildArgs: []string{"-test.run=^$"}})
}

// TestDescriptorsBetweenPlugins moves a shareable allocation from one
// plugin process to another through this process, as ranks do: plugin A
// exports, the host holds the descriptor, plugin B imports.
func TestDescriptorsBetweenPlugins(t *testing.T) {
	ctx := t.Context()
	a, b := openPlugin(t, 2), openPlugin(t, 2)
	require.NotEqual(t, a.PID(), b.PID())
	da, err := a.Open(ctx, 0)
	require.NoError(t, err)
	defer da.Close()
	db, err := b.Open(ctx, 1)
	require.NoError(t, err)
	defer db.Close()

	mem, err := da.AllocShareable(ctx, 10000, backend.HandleFD)
	require.NoError(t, err)
	defer mem.Close()
	require.Zero(t, mem.Size()%da.Granularity())
	want := make([]byte, mem.Size())
	for i := range want {
		want[i] = byte(i * 7)
	}
	require.NoError(t, da.CopyToDevice(ctx, mem.Ptr(), want))

	h, err := mem.Export(backend.HandleFD)
	require.NoError(t, err)
	require.Equal(t, mem.Size(), h.Size)
	// The descriptor reached this process: mapping it shows the bytes.
	view, err := unix.Mmap(int(h.File.Fd()), 0, h.Size, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	require.Equal(t, want, view)
	require.NoError(t, unix.Munmap(view))

	imp, err := db.Import(ctx, h)
	require.NoError(t, err)
	require.NoError(t, h.File.Close()) // Import did not take it
	defer imp.Close()
	got := make([]byte, imp.Size())
	require.NoError(t, db.CopyFromDevice(ctx, got, imp.Ptr()))
	require.Equal(t, want, got)

	require.NoError(t, db.Memset(ctx, imp.Ptr().Add(100), 0xee, 50))
	require.NoError(t, da.CopyFromDevice(ctx, got[:200], mem.Ptr()))
	require.Equal(t, byte(0xee), got[100])
	require.Equal(t, byte(0xee), got[149])
	require.Equal(t, want[150], got[150])

	_, err = db.Import(ctx, backend.Handle{Kind: backend.HandleFD, Size: 4096})
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

// TestHostMemoryShared checks that a host allocation's Bytes in the host
// and the plugin's memory are the same pages, both ways.
func TestHostMemoryShared(t *testing.T) {
	ctx := t.Context()
	b := openPlugin(t, 1)
	d, err := b.Open(ctx, 0)
	require.NoError(t, err)
	h, err := d.AllocHost(ctx, 64)
	require.NoError(t, err)
	require.Len(t, h.Bytes(), 64)
	require.Equal(t, make([]byte, 64), h.Bytes())
	require.NoError(t, d.Memset(ctx, h.Ptr(), 0x11, 8))
	require.Equal(t, []byte{0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0}, h.Bytes()[:9])
	binary.LittleEndian.PutUint32(h.Bytes()[16:], 0xdeadbeef)
	got := make([]byte, 4)
	require.NoError(t, d.CopyFromDevice(ctx, got, h.Ptr().Add(16)))
	require.Equal(t, uint32(0xdeadbeef), binary.LittleEndian.Uint32(got))
	require.NoError(t, h.Close())
	require.NoError(t, h.Close())
	require.NoError(t, d.Close())
}

// blockedStream returns a stream of b whose queue is stuck on a wait-signal
// kernel waiting for a peer that never signals.
func blockedStream(t *testing.T, b backend.Backend) backend.Stream {
	t.Helper()
	ctx := t.Context()
	d, err := b.Open(ctx, 0)
	require.NoError(t, err)
	var pads [2]backend.Allocation
	for i := range pads {
		pads[i], err = d.Alloc(ctx, kernels.SignalPadSize)
		require.NoError(t, err)
		require.NoError(t, d.Memset(ctx, pads[i].Ptr(), 0, kernels.SignalPadSize))
	}
	table, err := d.Alloc(ctx, 16)
	require.NoError(t, err)
	raw := binary.LittleEndian.AppendUint64(nil, uint64(pads[0].Ptr()))
	raw = binary.LittleEndian.AppendUint64(raw, uint64(pads[1].Ptr()))
	require.NoError(t, d.CopyToDevice(ctx, table.Ptr(), raw))
	status, err := d.AllocHost(ctx, 64)
	require.NoError(t, err)
	mod, err := d.LoadModule(ctx, backend.ModuleSource{Name: kernels.ModuleName})
	require.NoError(t, err)
	fn, err := mod.Function(kernels.WaitSignalKernel)
	require.NoError(t, err)
	s, err := d.NewStream(ctx)
	require.NoError(t, err)
	args := kernels.SignalArgs{Pads: table.Ptr(), Rank: 0, World: 2, Peer: 1, Status: status.Ptr(),
		TimeoutNs: uint64(5 * time.Minute)}
	require.NoError(t, s.Launch(fn, backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(32)}, args.Args()...))
	return s
}

// TestKillMidCall kills the plugin while the host waits in Synchronize:
// the wait must end at once with a clear error, and so must later calls.
func TestKillMidCall(t *testing.T) {
	b := openPlugin(t, 1)
	s := blockedStream(t, b)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		errc <- s.Synchronize(ctx)
	}()
	select {
	case err := <-errc:
		t.Fatalf("Synchronize returned before the kill: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, syscall.Kill(b.PID(), syscall.SIGKILL))
	select {
	case err := <-errc:
		require.ErrorIs(t, err, backend.ErrUnavailable)
		require.Contains(t, err.Error(), "plugin process is gone")
		require.Contains(t, err.Error(), "Synchronize")
		t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("Synchronize still waiting 30s after the plugin was killed")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := b.DeviceCount(ctx)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	// A call of the fast lane fails the same way (the lane is dropped and
	// the call goes to gRPC, which knows the process is gone).
	lane, _ := plugin.FastLaneCalls(b)
	require.True(t, lane)
	err = s.CopyAsync(0, 0, 0)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.Contains(t, err.Error(), "plugin process is gone")
	lane, _ = plugin.FastLaneCalls(b)
	require.False(t, lane)
	require.NoError(t, b.Close())
	_, err = b.DeviceCount(ctx)
	require.ErrorIs(t, err, backend.ErrClosed)
}

// TestNoPluginOutlivesItsHost: a host that exits without closing anything,
// and one killed outright, leave no plugin process behind.
func TestNoPluginOutlivesItsHost(t *testing.T) {
	bin := pluginBinary(t)
	for _, mode := range []string{"exit", "killed"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			hostMode := mode
			if mode == "killed" {
				hostMode = "wait"
			}
			host, pid := startHost(t, ctx, bin, hostMode)
			if mode == "killed" {
				require.NoError(t, host.Process.Kill())
			}
			_ = host.Wait()
			require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond,
				"plugin %d outlived its host", pid)
		})
	}
}

// TestCloseStopsThePlugin: Close ends the plugin process, and the objects
// of a closed backend fail (or close) quietly.
func TestCloseStopsThePlugin(t *testing.T) {
	ctx := t.Context()
	b := openPlugin(t, 2)
	d, err := b.Open(ctx, 1)
	require.NoError(t, err)
	a, err := d.Alloc(ctx, 100)
	require.NoError(t, err)
	pid := b.PID()
	require.True(t, alive(pid))
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond)
	_, err = d.Alloc(ctx, 100)
	require.ErrorIs(t, err, backend.ErrClosed)
	require.NoError(t, a.Close())
	require.NoError(t, d.Close())
}

// TestCloseKillsAStoppedPlugin: a plugin that can neither answer nor exit
// (stopped) does not hold Close up; it is killed.
func TestCloseKillsAStoppedPlugin(t *testing.T) {
	defer plugin.SetCloseGrace(500 * time.Millisecond)()
	b := openPlugin(t, 1)
	pid := b.PID()
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	start := time.Now()
	require.NoError(t, b.Close())
	require.Less(t, time.Since(start), 10*time.Second)
	require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond)
}

func TestOpenFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := t.TempDir()

	_, err := plugin.Open(ctx, filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, backend.ErrNotFound)
	_, err = plugin.Open(ctx, dir)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	_, err = plugin.Open(ctx, "")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	_, err = backend.Open(ctx, "plugin:intranode-no-such-plugin-in-path")
	require.ErrorIs(t, err, backend.ErrNotFound)

	// A binary that chats on stdout instead of serving.
	chatty := filepath.Join(dir, "chatty")
	require.NoError(t, os.WriteFile(chatty, []byte("#!/bin/sh\necho hello from a plugin >&2\necho hello\nexec sleep 30\n"), 0o755))
	_, err = plugin.Open(ctx, chatty)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.Contains(t, err.Error(), "stdout")
	require.Contains(t, err.Error(), "hello from a plugin")

	// The plugin binary run by hand says what it is.
	out, err := exec.CommandContext(ctx, pluginBinary(t)).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "is an intranode backend plugin")

	// A plugin whose backend cannot start says why.
	_, err = plugin.Open(ctx, pluginBinary(t), plugin.WithArgs("devices=0"))
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.True(t, strings.Contains(err.Error(), "devices"), err.Error())
}

// BenchmarkCall times one call to a plugin process: DeviceCount and
// Synchronize over gRPC, Record over a fast lane, and Record over gRPC
// once the lanes are dropped.
func BenchmarkCall(b *testing.B) {
	pb := openPlugin(b, 1)
	ctx := b.Context()
	d, err := pb.Open(ctx, 0)
	require.NoError(b, err)
	b.Cleanup(func() { _ = d.Close() })
	s, err := d.NewStream(ctx)
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	ev, err := d.NewEvent(ctx, false)
	require.NoError(b, err)
	b.Cleanup(func() { _ = ev.Close() })
	for _, bc := range []struct {
		name string
		call func() error
	}{
		{"grpc-DeviceCount", func() error { _, err := pb.DeviceCount(ctx); return err }},
		{"grpc-Synchronize", func() error { return s.Synchronize(ctx) }},
		{"lane-Record", func() error { return s.Record(ev) }},
		{"grpc-Record", func() error {
			plugin.DropFastLane(pb)
			return s.Record(ev)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
