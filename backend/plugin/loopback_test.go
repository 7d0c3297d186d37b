//go:build linux

package plugin_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/backend/plugin/plugintest"
	"github.com/intranode/intranode/conformance"
)

// TestConformanceLoopback runs the whole suite on the fake backend served
// over go-plugin's in-process gRPC connection, ranks as goroutines.
func TestConformanceLoopback(t *testing.T) {
	conformance.RunTests(t, conformance.Config{
		Open: func(context.Context) (backend.Backend, error) {
			fb, err := fake.New()
			if err != nil {
				return nil, err
			}
			return plugintest.Connect(t, fb), nil
		},
		Worlds: []int{2, 4, 8},
		Quick:  true,
	})
}

func TestLoopbackBasics(t *testing.T) {
	fb, err := fake.New(fake.WithDevices(2))
	require.NoError(t, err)
	b := plugintest.Connect(t, fb)
	ctx := t.Context()
	n, err := b.DeviceCount(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = b.DeviceInfo(ctx, 5)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}
