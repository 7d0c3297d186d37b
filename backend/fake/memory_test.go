//go:build linux

package fake_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
)

func TestAllocCopyRoundTrip(t *testing.T) {
	e := newEnv(t, fake.WithDevices(2))
	kinds := []struct {
		name  string
		alloc func(size int) (backend.Allocation, error)
	}{
		{"plain", func(n int) (backend.Allocation, error) { return e.d.Alloc(e.ctx, n) }},
		{"shareable", func(n int) (backend.Allocation, error) { return e.d.AllocShareable(e.ctx, n, backend.HandleFD) }},
		{"host", func(n int) (backend.Allocation, error) { return e.d.AllocHost(e.ctx, n) }},
	}
	for _, k := range kinds {
		for _, size := range []int{1, 7, 4095, 4096, 10000} {
			t.Run(fmt.Sprintf("%s/%d", k.name, size), func(t *testing.T) {
				a, err := k.alloc(size)
				require.NoError(t, err)
				defer func() { require.NoError(t, a.Close()) }()
				require.GreaterOrEqual(t, a.Size(), size)
				if k.name == "shareable" {
					require.Zero(t, a.Size()%e.d.Granularity())
				}

				zero := make([]byte, size)
				got := make([]byte, size)
				require.NoError(t, e.d.CopyFromDevice(e.ctx, got, a.Ptr()))
				require.Equal(t, zero, got, "new memory is zeroed")

				want := bytes.Repeat([]byte{1, 2, 3, 5, 8, 13, 21}, size/7+1)[:size]
				require.NoError(t, e.d.CopyToDevice(e.ctx, a.Ptr(), want))
				require.NoError(t, e.d.CopyFromDevice(e.ctx, got, a.Ptr()))
				require.Equal(t, want, got)
				if h, ok := a.(backend.HostAllocation); ok {
					require.Equal(t, want, h.Bytes(), "host view sees device writes")
				}

				require.NoError(t, e.d.Memset(e.ctx, a.Ptr(), 0xab, size))
				require.NoError(t, e.d.CopyFromDevice(e.ctx, got, a.Ptr()))
				require.Equal(t, bytes.Repeat([]byte{0xab}, size), got)

				// Device memory of any device resolves in this process.
				d1, err := e.b.Open(e.ctx, 1)
				require.NoError(t, err)
				require.NoError(t, d1.CopyFromDevice(e.ctx, got, a.Ptr()))
				require.NoError(t, d1.Close())
			})
		}
	}
}

func TestBytesBounds(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1))
	a := e.alloc(t, 100)
	closed, err := e.d.Alloc(e.ctx, 64)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	require.NoError(t, closed.Close(), "closing twice is a no-op")

	tests := []struct {
		name    string
		p       backend.DevicePtr
		n       int
		wantErr string
	}{
		{"whole", a.Ptr(), 100, ""},
		{"tail", a.Ptr().Add(99), 1, ""},
		{"empty at end", a.Ptr().Add(100), 0, ""},
		{"past end", a.Ptr(), 101, "runs past the end"},
		{"past end from inside", a.Ptr().Add(60), 41, "by 1 bytes"},
		{"beyond usable size", a.Ptr().Add(200), 1, "not inside a live allocation"},
		{"before", a.Ptr() - 1, 1, "not inside a live allocation"},
		{"null", 0, 4, "not inside a live allocation"},
		{"negative length", a.Ptr(), -1, "negative length"},
		{"after close", closed.Ptr(), 4, "not inside a live allocation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lease := fake.Addresses().Lease()
			defer lease.Release()
			for _, mem := range []fake.Memory{fake.Addresses(), lease} {
				b, err := mem.Bytes(tc.p, tc.n)
				if tc.wantErr == "" {
					require.NoError(t, err)
					require.Len(t, b, tc.n)
					continue
				}
				require.ErrorIs(t, err, backend.ErrInvalidArgument)
				require.ErrorContains(t, err, tc.wantErr)
				require.ErrorContains(t, err, fmt.Sprintf("%#x", uint64(tc.p)), "the error names the pointer")
			}
			// Synchronous copies check the same bounds.
			if tc.wantErr != "" && tc.n > 0 {
				require.ErrorIs(t, e.d.CopyToDevice(e.ctx, tc.p, make([]byte, tc.n)), backend.ErrInvalidArgument)
				require.ErrorIs(t, e.d.CopyFromDevice(e.ctx, make([]byte, tc.n), tc.p), backend.ErrInvalidArgument)
				require.ErrorIs(t, e.d.Memset(e.ctx, tc.p, 0, tc.n), backend.ErrInvalidArgument)
			}
		})
	}
}

func TestLeaseKeepsClosedMemoryMapped(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1))
	a, err := e.d.Alloc(e.ctx, 4096)
	require.NoError(t, err)
	l := fake.Addresses().Lease()
	b, err := l.Bytes(a.Ptr(), 4096)
	require.NoError(t, err)

	require.NoError(t, a.Close())
	b[4095] = 7 // still mapped: the lease pins it
	_, err = l.Bytes(a.Ptr(), 4)
	require.ErrorIs(t, err, backend.ErrInvalidArgument, "a closed allocation no longer resolves, even through a lease that holds it")
	_, err = fake.Addresses().Bytes(a.Ptr(), 4)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	l.Release()
	l.Release()
	_, err = l.Bytes(a.Ptr(), 4)
	require.ErrorIs(t, err, backend.ErrClosed)
}

func TestMemoryLimit(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, fake.WithDevices(2), fake.WithMemoryLimit(limit))
	info, err := e.b.DeviceInfo(e.ctx, 1)
	require.NoError(t, err)
	require.Equal(t, uint64(limit), info.MemoryBytes)

	tests := []struct {
		name  string
		alloc func(n int) (backend.Allocation, error)
	}{
		{"plain", func(n int) (backend.Allocation, error) { return e.d.Alloc(e.ctx, n) }},
		{"shareable", func(n int) (backend.Allocation, error) { return e.d.AllocShareable(e.ctx, n, backend.HandleFD) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.alloc(limit + 1)
			require.ErrorIs(t, err, backend.ErrOutOfMemory)

			a, err := tc.alloc(limit / 2)
			require.NoError(t, err)
			// A second handle on the same device shares its memory.
			d2, err := e.b.Open(e.ctx, 0)
			require.NoError(t, err)
			b, err := d2.Alloc(e.ctx, limit/2)
			require.NoError(t, err)
			_, err = tc.alloc(1)
			require.ErrorIs(t, err, backend.ErrOutOfMemory)
			require.ErrorContains(t, err, "in use")

			// Another device has its own memory; host memory is not counted.
			d1, err := e.b.Open(e.ctx, 1)
			require.NoError(t, err)
			c, err := d1.Alloc(e.ctx, limit)
			require.NoError(t, err)
			h, err := e.d.AllocHost(e.ctx, limit)
			require.NoError(t, err)

			for _, x := range []backend.Allocation{a, b, c, h} {
				require.NoError(t, x.Close())
			}
			require.NoError(t, d1.Close())
			require.NoError(t, d2.Close())
			a, err = tc.alloc(limit)
			require.NoError(t, err, "freed memory is available again")
			require.NoError(t, a.Close())
		})
	}
}

func TestAllocErrors(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1))
	tests := []struct {
		name string
		fn   func() error
		want error
	}{
		{"zero size", func() error { _, err := e.d.Alloc(e.ctx, 0); return err }, backend.ErrInvalidArgument},
		{"negative size", func() error { _, err := e.d.AllocHost(e.ctx, -4); return err }, backend.ErrInvalidArgument},
		{"bad handle kind", func() error { _, err := e.d.AllocShareable(e.ctx, 8, 0); return err }, backend.ErrInvalidArgument},
		{"fabric off", func() error { _, err := e.d.AllocShareable(e.ctx, 8, backend.HandleFabric); return err }, backend.ErrNotSupported},
		{"export plain", func() error {
			a, err := e.d.Alloc(e.ctx, 8)
			require.NoError(t, err)
			defer a.Close()
			_, err = a.Export(backend.HandleFD)
			return err
		}, backend.ErrNotSupported},
		{"export host", func() error {
			a, err := e.d.AllocHost(e.ctx, 8)
			require.NoError(t, err)
			defer a.Close()
			_, err = a.Export(backend.HandleFD)
			return err
		}, backend.ErrNotSupported},
		{"export as another kind", func() error {
			a, err := e.d.AllocShareable(e.ctx, 8, backend.HandleFD)
			require.NoError(t, err)
			defer a.Close()
			_, err = a.Export(backend.HandleFabric)
			return err
		}, backend.ErrNotSupported},
		{"export closed", func() error {
			a, err := e.d.AllocShareable(e.ctx, 8, backend.HandleFD)
			require.NoError(t, err)
			require.NoError(t, a.Close())
			_, err = a.Export(backend.HandleFD)
			return err
		}, backend.ErrClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.fn(), tc.want)
		})
	}
}
