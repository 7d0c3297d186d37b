//go:build linux

package plugin_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
	"github.com/intranode/intranode/backend/plugin"
	"github.com/intranode/intranode/backend/plugin/plugintest"
	"github.com/intranode/intranode/conformance"
	"github.com/intranode/intranode/kernels"
)

// loopback serves a fake backend through go-plugin's in-process gRPC
// connection.
func loopback(t *testing.T, opts ...fake.Option) *plugin.Backend {
	t.Helper()
	fb, err := fake.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fb.Close() })
	return plugintest.Connect(t, fb)
}

// TestConformanceLoopback runs the suite on the fake backend served over
// go-plugin's in-process gRPC connection, ranks as goroutines.
func TestConformanceLoopback(t *testing.T) {
	t.Parallel() // mostly waiting on round trips: overlapped with the processes' run
	conformance.RunTests(t, conformance.Config{
		Open: func(context.Context) (backend.Backend, error) {
			fb, err := fake.New()
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = fb.Close() })
			return plugintest.Connect(t, fb), nil
		},
		Worlds: []int{2},
		Quick:  true,
	})
}

// TestErrorsKeepTheirCodes: errors of the served backend reach the host
// with their code and message, so errors.Is works as it does in process.
func TestErrorsKeepTheirCodes(t *testing.T) {
	ctx := t.Context()
	b := loopback(t, fake.WithDevices(2), fake.WithMemoryLimit(1<<20))
	require.Equal(t, "plugin:loopback", b.Name())
	require.Equal(t, fake.Name, b.Served())
	require.NoError(t, b.Probe(ctx))

	_, err := b.DeviceInfo(ctx, 5)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.Equal(t, backend.CodeInvalidArgument, backend.CodeOf(err))
	require.Contains(t, err.Error(), "fake: device 5 out of range")
	_, err = b.Open(ctx, -1)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)

	d, err := b.Open(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, d.Index())
	require.Equal(t, "0000:01:00.0", d.Info().PCIBusID)
	_, err = d.Alloc(ctx, 2<<20)
	require.ErrorIs(t, err, backend.ErrOutOfMemory)
	_, err = d.AllocShareable(ctx, 4096, backend.HandleFabric)
	require.ErrorIs(t, err, backend.ErrNotSupported)
	_, err = d.LoadModule(ctx, backend.ModuleSource{Image: []byte{1, 2, 3}})
	require.ErrorIs(t, err, backend.ErrNotSupported)
	_, err = d.LoadModule(ctx, backend.ModuleSource{Name: "no/such/module"})
	require.ErrorIs(t, err, backend.ErrNotFound)
	err = d.CopyToDevice(ctx, 0x10, []byte{1})
	require.ErrorIs(t, err, backend.ErrInvalidArgument)

	plain, err := d.Alloc(ctx, 64)
	require.NoError(t, err)
	_, err = plain.Export(backend.HandleFD)
	require.ErrorIs(t, err, backend.ErrNotSupported)
	require.NoError(t, plain.Close())
	require.NoError(t, plain.Close())

	s, err := d.NewStream(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.CopyAsync(0, 0, 1), backend.ErrClosed)

	// An expired context is a timeout, wherever it is noticed.
	dead, cancel := context.WithTimeout(ctx, -time.Second)
	defer cancel()
	_, err = b.DeviceCount(dead)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Objects of another backend are refused before any call.
	other := loopback(t, fake.WithDevices(1))
	od, err := other.Open(ctx, 0)
	require.NoError(t, err)
	foreign, err := od.NewStream(ctx)
	require.NoError(t, err)
	ev, err := d.NewEvent(ctx, false)
	require.NoError(t, err)
	require.ErrorIs(t, foreign.Record(ev), backend.ErrInvalidArgument)
	require.NoError(t, ev.Close())
	require.NoError(t, foreign.Close())
	require.NoError(t, od.Close())

	require.NoError(t, d.Close())
	_, err = d.Alloc(ctx, 64)
	require.ErrorIs(t, err, backend.ErrClosed)
}

// TestCheckRange: the plugin's device checks ranges against the
// allocations made through it, without a call, and gives no verdict
// elsewhere.
func TestCheckRange(t *testing.T) {
	ctx := t.Context()
	b := loopback(t, fake.WithDevices(1))
	d, err := b.Open(ctx, 0)
	require.NoError(t, err)
	defer d.Close()
	rc, ok := d.(backend.RangeChecker)
	require.True(t, ok)
	a, err := d.Alloc(ctx, 100)
	require.NoError(t, err)
	require.NoError(t, rc.CheckRange(a.Ptr(), 100))
	require.NoError(t, rc.CheckRange(a.Ptr().Add(99), 1))
	err = rc.CheckRange(a.Ptr().Add(1), 100)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, "past the end")
	require.NoError(t, a.Close())
	require.NoError(t, rc.CheckRange(a.Ptr(), 1<<20), "freed: no verdict")
}

// TestStreamsEventsGraphs drives copies, events and a captured graph
// through the protocol.
func TestStreamsEventsGraphs(t *testing.T) {
	ctx := t.Context()
	b := loopback(t, fake.WithDevices(1))
	require.True(t, b.Capabilities().Has(backend.CapGraphs|backend.CapTiming|backend.CapHandleFD))
	d, err := b.Open(ctx, 0)
	require.NoError(t, err)
	defer d.Close()
	const n = 3<<20 + 5 // several copy messages
	src, err := d.Alloc(ctx, n)
	require.NoError(t, err)
	defer src.Close()
	dst, err := d.Alloc(ctx, n)
	require.NoError(t, err)
	defer dst.Close()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i % 251)
	}
	require.NoError(t, d.CopyToDevice(ctx, src.Ptr(), data))

	s, err := d.NewStream(ctx)
	require.NoError(t, err)
	defer s.Close()
	start, err := d.NewEvent(ctx, true)
	require.NoError(t, err)
	end, err := d.NewEvent(ctx, true)
	require.NoError(t, err)
	require.NoError(t, s.BeginCapture())
	require.NoError(t, s.CopyAsync(dst.Ptr(), src.Ptr(), n))
	g, err := s.EndCapture()
	require.NoError(t, err)
	defer g.Close()

	require.NoError(t, s.Record(start))
	require.NoError(t, g.Launch(s))
	require.NoError(t, s.Record(end))
	require.NoError(t, end.Synchronize(ctx))
	done, err := end.Done()
	require.NoError(t, err)
	require.True(t, done)
	el, err := end.Elapsed(start)
	require.NoError(t, err)
	require.GreaterOrEqual(t, el, time.Duration(0))

	got := make([]byte, n)
	require.NoError(t, d.CopyFromDevice(ctx, got, dst.Ptr()))
	require.Equal(t, data, got)

	// A replay after changing the source copies again.
	require.NoError(t, d.Memset(ctx, src.Ptr(), 0x7f, 10))
	require.NoError(t, g.Launch(s))
	require.NoError(t, s.Synchronize(ctx))
	require.NoError(t, d.CopyFromDevice(ctx, got[:11], dst.Ptr()))
	require.Equal(t, []byte{0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, data[10]}, got[:11])

	// Work on freed memory is refused with the backend's code.
	require.NoError(t, src.Close())
	require.ErrorIs(t, s.CopyAsync(dst.Ptr(), src.Ptr(), n), backend.ErrInvalidArgument)
	require.NoError(t, start.Close())
	require.NoError(t, end.Close())
}

// TestDiagnostics: the plugin describes itself, then the served backend.
func TestDiagnostics(t *testing.T) {
	b := loopback(t, fake.WithDevices(1))
	diags := b.Diagnostics(t.Context())
	require.NotEmpty(t, diags)
	require.Equal(t, "plugin", diags[0].Check)
	require.True(t, diags[0].OK)
	require.Contains(t, diags[0].Detail, `serves backend "fake"`)
}

// TestDeviceCloseReportsLeftovers: closing a device with objects still open
// releases them in the plugin and reports them, as the fake does in
// process; host views of host memory are unmapped.
func TestDeviceCloseReportsLeftovers(t *testing.T) {
	ctx := t.Context()
	b := loopback(t, fake.WithDevices(1))
	d, err := b.Open(ctx, 0)
	require.NoError(t, err)
	_, err = d.Alloc(ctx, 64)
	require.NoError(t, err)
	h, err := d.AllocHost(ctx, 64)
	require.NoError(t, err)
	_, err = d.NewStream(ctx)
	require.NoError(t, err)
	err = d.Close()
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.Contains(t, err.Error(), "2 allocation(s), 1 stream(s)")
	require.NoError(t, h.Close())
	require.NoError(t, d.Close())
}

// TestFabricHandles: opaque handles travel in the messages themselves.
func TestFabricHandles(t *testing.T) {
	ctx := t.Context()
	b := loopback(t, fake.WithDevices(2), fake.WithFabric(true))
	require.True(t, b.Capabilities().Has(backend.CapHandleFabric))
	ok, err := b.FabricSupported(ctx, 0)
	require.NoError(t, err)
	require.True(t, ok)
	d0, err := b.Open(ctx, 0)
	require.NoError(t, err)
	defer d0.Close()
	d1, err := b.Open(ctx, 1)
	require.NoError(t, err)
	defer d1.Close()
	a, err := d0.AllocShareable(ctx, 100, backend.HandleFabric)
	require.NoError(t, err)
	defer a.Close()
	h, err := a.Export(backend.HandleFabric)
	require.NoError(t, err)
	require.Nil(t, h.File)
	require.NotEmpty(t, h.Opaque)
	imp, err := d1.Import(ctx, h)
	require.NoError(t, err)
	defer imp.Close()
	require.NoError(t, d0.Memset(ctx, a.Ptr(), 0x42, 3))
	got := make([]byte, 4)
	require.NoError(t, d1.CopyFromDevice(ctx, got, imp.Ptr()))
	require.Equal(t, []byte{0x42, 0x42, 0x42, 0}, got)
}

// TestFastLane: the short stream calls cross the fast lane, a backend's
// error arrives over it with its code as over gRPC, a request too large for
// it goes over gRPC, and once the lane is dropped (as a failed call drops
// it) the same calls go over gRPC with the same results.
func TestFastLane(t *testing.T) {
	ctx := t.Context()
	b := loopback(t, fake.WithDevices(1))
	d := gputest.OpenDevice(t, b, 0)
	s, err := d.NewStream(ctx)
	require.NoError(t, err)
	gputest.CloseLater(t, s)
	const n = 256
	src, dst := gputest.Alloc(t, d, n), gputest.Alloc(t, d, n)

	run := func(v byte) error {
		data := bytes.Repeat([]byte{v}, n)
		require.NoError(t, d.CopyToDevice(ctx, src.Ptr(), data))
		require.NoError(t, s.CopyAsync(dst.Ptr(), src.Ptr(), n))
		ev, err := d.NewEvent(ctx, false)
		require.NoError(t, err)
		require.NoError(t, s.Record(ev))
		require.NoError(t, s.Synchronize(ctx))
		done, err := ev.Done()
		require.NoError(t, err)
		require.True(t, done)
		got := make([]byte, n)
		require.NoError(t, d.CopyFromDevice(ctx, got, dst.Ptr()))
		require.Equal(t, data, got)
		require.NoError(t, ev.Close())
		return s.Record(ev) // the plugin no longer has the event
	}
	ok, before := plugin.FastLaneCalls(b)
	require.True(t, ok)
	fastErr := run(1)
	ok, after := plugin.FastLaneCalls(b)
	require.True(t, ok)
	require.Equal(t, before+4, after, "copy, record, query and the refused record")
	require.ErrorIs(t, fastErr, backend.ErrClosed)

	f, err := gputest.BuiltinModule(t, d).Function(kernels.PutSignalKernel)
	require.NoError(t, err)
	many := make([]backend.Arg, 5000)
	for i := range many {
		many[i] = backend.U64(uint64(i))
	}
	s2, err := d.NewStream(ctx)
	require.NoError(t, err)
	gputest.CloseLater(t, s2)
	require.NoError(t, s2.Launch(f, backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(32)}, many...))
	_, after2 := plugin.FastLaneCalls(b)
	require.Equal(t, after, after2, "a request over the lane's packet size goes over gRPC")
	require.ErrorContains(t, s2.Synchronize(ctx), "5000 arguments, want 8", "the whole request arrived")

	plugin.DropFastLane(b)
	slowErr := run(2)
	ok, _ = plugin.FastLaneCalls(b)
	require.False(t, ok)
	require.ErrorIs(t, slowErr, backend.ErrClosed)
	require.Equal(t, backend.CodeOf(fastErr), backend.CodeOf(slowErr))
}
