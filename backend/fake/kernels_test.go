//go:build linux

package fake_test

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
)

// testModule is a tiny module of kernels for these tests.
const testModule = "test/ops"

func init() {
	fake.RegisterModule(testModule, map[string]fake.Kernel{
		// append(log, v): log is a uint32 count followed by entries.
		"append": func(_ context.Context, l *fake.Launch) error {
			hdr, err := l.Mem.Bytes(l.Args[0].Ptr(), 4)
			if err != nil {
				return err
			}
			n := binary.LittleEndian.Uint32(hdr)
			slot, err := l.Mem.Bytes(l.Args[0].Ptr().Add(4+4*int(n)), 4)
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint32(slot, l.Args[1].U32())
			binary.LittleEndian.PutUint32(hdr, n+1)
			return nil
		},
		// add1(p, n): adds 1 to n uint32 words.
		"add1": func(_ context.Context, l *fake.Launch) error {
			n := int(l.Args[1].U64())
			b, err := l.Mem.Bytes(l.Args[0].Ptr(), 4*n)
			if err != nil {
				return err
			}
			for i := range n {
				binary.LittleEndian.PutUint32(b[4*i:], binary.LittleEndian.Uint32(b[4*i:])+1)
			}
			return nil
		},
		// set(p, v): stores one uint32.
		"set": func(_ context.Context, l *fake.Launch) error {
			b, err := l.Mem.Bytes(l.Args[0].Ptr(), 4)
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint32(b, l.Args[1].U32())
			return nil
		},
		// copyword(dst, src): copies one uint32.
		"copyword": func(_ context.Context, l *fake.Launch) error {
			dst, err := l.Mem.Bytes(l.Args[0].Ptr(), 4)
			if err != nil {
				return err
			}
			src, err := l.Mem.Bytes(l.Args[1].Ptr(), 4)
			if err != nil {
				return err
			}
			copy(dst, src)
			return nil
		},
		// gate(g): spins until the uint32 at g is non-zero or ctx ends.
		"gate": func(ctx context.Context, l *fake.Launch) error {
			b, err := l.Mem.Bytes(l.Args[0].Ptr(), 4)
			if err != nil {
				return err
			}
			return spin(ctx, word(b))
		},
		// gatedset(p, g, v): resolves p, raises the word after g, spins on
		// g, then stores v at p.
		"gatedset": func(ctx context.Context, l *fake.Launch) error {
			p, err := l.Mem.Bytes(l.Args[0].Ptr(), 4)
			if err != nil {
				return err
			}
			g, err := l.Mem.Bytes(l.Args[1].Ptr(), 8)
			if err != nil {
				return err
			}
			atomic.StoreUint32(word(g[4:]), 1)
			if err := spin(ctx, word(g)); err != nil {
				return err
			}
			binary.LittleEndian.PutUint32(p, l.Args[2].U32())
			return nil
		},
		// hang waits for the stream to close.
		"hang": func(ctx context.Context, _ *fake.Launch) error {
			<-ctx.Done()
			return ctx.Err()
		},
		"fail": func(context.Context, *fake.Launch) error {
			return backend.Errorf(backend.CodeInvalidArgument, "test/ops.fail: asked to fail")
		},
		"panic": func(context.Context, *fake.Launch) error {
			panic("test/ops.panic")
		},
	})
}

// word views 4 bytes of device memory as a uint32 for atomic access.
func word(b []byte) *uint32 { return (*uint32)(unsafe.Pointer(&b[0])) }

func spin(ctx context.Context, w *uint32) error {
	for atomic.LoadUint32(w) == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// env is one backend with one device handle and the test module loaded.
type env struct {
	ctx context.Context
	b   *fake.Backend
	d   backend.Device
	mod backend.Module
}

func newEnv(t *testing.T, opts ...fake.Option) *env {
	t.Helper()
	ctx := t.Context()
	b, err := fake.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	d, err := b.Open(ctx, 0)
	require.NoError(t, err)
	mod, err := d.LoadModule(ctx, backend.ModuleSource{Name: testModule})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, mod.Close())
		require.NoError(t, d.Close())
	})
	return &env{ctx: ctx, b: b, d: d, mod: mod}
}

func (e *env) fn(t *testing.T, name string) backend.Function {
	t.Helper()
	f, err := e.mod.Function(name)
	require.NoError(t, err)
	return f
}

func (e *env) stream(t *testing.T) backend.Stream {
	t.Helper()
	s, err := e.d.NewStream(e.ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func (e *env) alloc(t *testing.T, size int) backend.Allocation {
	t.Helper()
	a, err := e.d.Alloc(e.ctx, size)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}

func (e *env) host(t *testing.T, size int) backend.HostAllocation {
	t.Helper()
	a, err := e.d.AllocHost(e.ctx, size)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}

func (e *env) u32(t *testing.T, p backend.DevicePtr) uint32 {
	t.Helper()
	b := make([]byte, 4)
	require.NoError(t, e.d.CopyFromDevice(e.ctx, b, p))
	return binary.LittleEndian.Uint32(b)
}

// one is a single-block launch.
func one() backend.LaunchConfig {
	return backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(1)}
}
