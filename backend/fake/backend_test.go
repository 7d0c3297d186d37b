//go:build linux

package fake_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/connectivity"
)

func TestPresets(t *testing.T) {
	tests := []struct {
		preset  fake.Preset
		n       int
		want    connectivity.Topology
		wantErr bool
	}{
		{fake.PresetFull, 8, connectivity.FullyConnected, false},
		{fake.PresetFull, 2, connectivity.FullyConnected, false},
		{fake.PresetHCM, 8, connectivity.HybridCubeMesh, false},
		{fake.PresetHCM, 4, connectivity.Unknown, true},
		{fake.PresetRing, 8, connectivity.Unknown, false},
		{fake.PresetRing, 3, connectivity.FullyConnected, false},
		{fake.PresetRing, 2, connectivity.FullyConnected, false},
		{fake.PresetPairs, 2, connectivity.FullyConnected, false},
		{fake.PresetPairs, 5, connectivity.Unknown, false},
		{fake.PresetNone, 4, connectivity.Unknown, false},
		{fake.PresetNone, 1, connectivity.Unknown, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.preset, tc.n), func(t *testing.T) {
			b, err := fake.New(fake.WithDevices(tc.n), fake.WithTopology(tc.preset))
			if tc.wantErr {
				require.ErrorIs(t, err, backend.ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.preset, b.Topology())
			m, err := b.LinkMatrix(t.Context())
			require.NoError(t, err)
			require.NoError(t, m.Validate())
			require.Equal(t, connectivity.LinkShared, m.Kind)
			require.Equal(t, tc.n, m.Size())
			require.Equal(t, tc.want, connectivity.Detect(m))
			for i := range tc.n {
				for j := range tc.n {
					require.Equal(t, m.At(i, j), m.At(j, i), "symmetric at %d,%d", i, j)
					ok, err := b.PeerAccess(t.Context(), i, j)
					require.NoError(t, err)
					require.Equal(t, i == j || m.At(i, j) > 0, ok, "peer access %d→%d", i, j)
				}
			}
			m.Set(0, 0, 99)
			again, err := b.LinkMatrix(t.Context())
			require.NoError(t, err)
			require.Zero(t, again.At(0, 0), "LinkMatrix returns a copy")
		})
	}
}

func TestPresetShapes(t *testing.T) {
	hcm, err := fake.PresetHCM.Matrix(8)
	require.NoError(t, err)
	for i := range 8 {
		var quad, cross, links int
		for j := range 8 {
			if hcm.At(i, j) == 0 {
				continue
			}
			links += hcm.At(i, j)
			if i/4 == j/4 {
				quad++
			} else {
				cross++
				require.Equal(t, (i+4)%8, j, "the cross link of %d", i)
			}
		}
		require.Equal(t, 3, quad, "device %d", i)
		require.Equal(t, 1, cross, "device %d", i)
		require.Equal(t, 6, links, "device %d has the 6 NVLinks of a V100", i)
	}

	full, err := fake.PresetFull.Matrix(4)
	require.NoError(t, err)
	require.Equal(t, fake.LinksPerPair, full.At(1, 3))
	ring, err := fake.PresetRing.Matrix(5)
	require.NoError(t, err)
	require.Equal(t, fake.LinksPerPair, ring.At(4, 0))
	require.Zero(t, ring.At(0, 2))
	pairs, err := fake.PresetPairs.Matrix(4)
	require.NoError(t, err)
	require.Equal(t, fake.LinksPerPair, pairs.At(3, 2))
	require.Zero(t, pairs.At(1, 2))
	_, err = fake.Preset("mesh").Matrix(4)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	_, err = fake.PresetFull.Matrix(0)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

func TestParsePreset(t *testing.T) {
	for _, p := range fake.Presets() {
		got, err := fake.ParsePreset(string(p))
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	got, err := fake.ParsePreset(" HCM ")
	require.NoError(t, err)
	require.Equal(t, fake.PresetHCM, got)
	_, err = fake.ParsePreset("torus")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, `"torus"`)
	require.ErrorContains(t, err, "full, hcm, ring, pairs, none")
}

func TestBackendInfo(t *testing.T) {
	ctx := t.Context()
	b, err := fake.New(fake.WithDevices(4), fake.WithMemoryLimit(1<<30))
	require.NoError(t, err)
	require.Equal(t, "fake", b.Name())
	require.NoError(t, b.Probe(ctx))
	n, err := b.DeviceCount(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	info, err := b.DeviceInfo(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, backend.DeviceInfo{
		Index:        3,
		Name:         "intranode fake device",
		PCIBusID:     "0000:03:00.0",
		UUID:         "FAKE-00000000-0000-0000-0000-000000000003",
		MemoryBytes:  1 << 30,
		Architecture: "fake",
	}, info)
	d, err := b.Open(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 3, d.Index())
	require.Equal(t, info, d.Info())
	require.Equal(t, 4096, d.Granularity())
	require.NoError(t, d.Close())

	mc, err := b.MulticastSupported(ctx, 0)
	require.NoError(t, err)
	require.False(t, mc)
	fab, err := b.FabricSupported(ctx, 0)
	require.NoError(t, err)
	require.False(t, fab)
	require.False(t, b.Capabilities().Has(backend.CapHandleFabric))
	require.True(t, b.Capabilities().Has(backend.CapMultiProcess|backend.CapHandleFD|backend.CapGraphs|
		backend.CapHostMapped|backend.CapTiming|backend.CapOverlapDevices))

	fb, err := fake.New(fake.WithDevices(1), fake.WithFabric(true))
	require.NoError(t, err)
	require.True(t, fb.Capabilities().Has(backend.CapHandleFabric))

	for _, i := range []int{-1, 4} {
		_, err := b.DeviceInfo(ctx, i)
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
		_, err = b.Open(ctx, i)
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
		_, err = b.PeerAccess(ctx, 0, i)
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
		_, err = b.FabricSupported(ctx, i)
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
		_, err = b.MulticastSupported(ctx, i)
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
	}
	require.NoError(t, b.Close())
	_, err = b.DeviceCount(ctx)
	require.ErrorIs(t, err, backend.ErrClosed)
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []fake.Option
		want error
	}{
		{"defaults", nil, nil},
		{"zero devices", []fake.Option{fake.WithDevices(0)}, backend.ErrInvalidArgument},
		{"too many devices", []fake.Option{fake.WithDevices(fake.MaxDevices + 1)}, backend.ErrInvalidArgument},
		{"unknown preset", []fake.Option{fake.WithTopology("cube")}, backend.ErrInvalidArgument},
		{"hcm on 4", []fake.Option{fake.WithDevices(4), fake.WithTopology(fake.PresetHCM)}, backend.ErrInvalidArgument},
		{"zero memory", []fake.Option{fake.WithMemoryLimit(0)}, backend.ErrInvalidArgument},
		{"nil logger", []fake.Option{fake.WithLogger(nil)}, backend.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := fake.New(tc.opts...)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			n, err := b.DeviceCount(t.Context())
			require.NoError(t, err)
			require.Equal(t, fake.DefaultDevices, n)
			info, err := b.DeviceInfo(t.Context(), 0)
			require.NoError(t, err)
			require.Equal(t, uint64(fake.DefaultMemoryLimit), info.MemoryBytes)
			require.Equal(t, fake.PresetFull, b.Topology())
		})
	}
}

func TestRegistryOpen(t *testing.T) {
	require.Contains(t, backend.Drivers(), fake.Name)
	tests := []struct {
		name     string
		env      map[string]string
		open     string
		devices  int
		topology fake.Preset
		fabric   bool
	}{
		{"defaults", nil, "fake", fake.DefaultDevices, fake.PresetFull, false},
		{"auto", nil, "auto", fake.DefaultDevices, fake.PresetFull, false},
		{"env", map[string]string{fake.EnvDevices: "4", fake.EnvTopology: "ring"}, "fake", 4, fake.PresetRing, false},
		{"arg overrides env", map[string]string{fake.EnvDevices: "4"}, "fake:devices=8,topology=hcm,fabric=true,memory=4096", 8, fake.PresetHCM, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setFakeEnv(t, tc.env)
			b, err := backend.Open(t.Context(), tc.open)
			require.NoError(t, err)
			defer b.Close()
			fb, ok := b.(*fake.Backend)
			require.True(t, ok, "got a %T", b)
			n, err := fb.DeviceCount(t.Context())
			require.NoError(t, err)
			require.Equal(t, tc.devices, n)
			require.Equal(t, tc.topology, fb.Topology())
			require.Equal(t, tc.fabric, fb.Capabilities().Has(backend.CapHandleFabric))
		})
	}
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		arg  string
		msgs []string
	}{
		{"devices not a number", map[string]string{fake.EnvDevices: "eight"}, "", []string{fake.EnvDevices, `"eight"`, "not an integer"}},
		{"devices out of range", map[string]string{fake.EnvDevices: "0"}, "", []string{fake.EnvDevices, "want 1 to 256"}},
		{"unknown topology", map[string]string{fake.EnvTopology: "torus"}, "", []string{fake.EnvTopology, "torus", "full, hcm, ring, pairs, none"}},
		{"hcm on 4", map[string]string{fake.EnvDevices: "4", fake.EnvTopology: "hcm"}, "", []string{"needs exactly 8 devices, have 4"}},
		{"arg without value", nil, "devices", []string{`"devices"`, "key=value"}},
		{"arg unknown key", nil, "colour=red", []string{"colour", "unknown key"}},
		{"arg bad bool", nil, "fabric=maybe", []string{"fabric", "not a boolean"}},
		{"arg bad memory", nil, "memory=-1", []string{"memory", "positive number of bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setFakeEnv(t, tc.env)
			name := "fake"
			if tc.arg != "" {
				name += ":" + tc.arg
			}
			_, err := backend.Open(t.Context(), name)
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
			for _, m := range tc.msgs {
				require.ErrorContains(t, err, m)
			}
		})
	}
}

// setFakeEnv sets the fake's environment variables to env for the test,
// clearing the others.
func setFakeEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range []string{fake.EnvDevices, fake.EnvTopology, fake.EnvBrokenP2P} {
		t.Setenv(k, env[k])
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// TestFailedAllocationIsNil: a failed Alloc, AllocShareable or Import
// returns a nil Allocation, not an interface holding a nil pointer (which
// compares unequal to nil, so a caller that keeps it and closes it later
// crashed: a rendezvous cut short by a peer's exit, 2026-11-28).
func TestFailedAllocationIsNil(t *testing.T) {
	b, err := fake.New(fake.WithDevices(1))
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	d, err := b.Open(t.Context(), 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	done, cancel := context.WithCancel(t.Context())
	cancel()
	a, err := d.Alloc(done, 4096)
	require.Error(t, err)
	require.True(t, a == nil, "Alloc: %#v", a)
	a, err = d.AllocShareable(done, 4096, backend.HandleFD)
	require.Error(t, err)
	require.True(t, a == nil, "AllocShareable: %#v", a)
	a, err = d.Import(done, backend.Handle{Kind: backend.HandleFD, Size: 4096})
	require.Error(t, err)
	require.True(t, a == nil, "Import: %#v", a)
}
