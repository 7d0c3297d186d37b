package kernels

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const testEnv = "INTRANODE_TEST_KERNELS_IMAGE"

func embeddedImage() []byte { return []byte("embedded") }

func TestLoadImage(t *testing.T) {
	t.Setenv(testEnv, "")
	b, err := LoadImage("pkg", testEnv, embeddedImage, nil)
	require.NoError(t, err)
	require.Equal(t, []byte("embedded"), b)

	path := filepath.Join(t.TempDir(), "k.img")
	require.NoError(t, os.WriteFile(path, []byte("override"), 0o600))
	t.Setenv(testEnv, path)
	b, err = LoadImage("pkg", testEnv, embeddedImage, nil)
	require.NoError(t, err)
	require.Equal(t, []byte("override"), b)

	upper := func(b []byte) ([]byte, error) { return bytes.ToUpper(b), nil }
	b, err = LoadImage("pkg", testEnv, embeddedImage, upper)
	require.NoError(t, err)
	require.Equal(t, []byte("OVERRIDE"), b)

	bad := func([]byte) ([]byte, error) { return nil, errors.New("not an image") }
	_, err = LoadImage("pkg", testEnv, embeddedImage, bad)
	require.ErrorContains(t, err, "pkg: "+testEnv+": "+path+": not an image")

	t.Setenv(testEnv, filepath.Join(t.TempDir(), "absent.img"))
	_, err = LoadImage("pkg", testEnv, embeddedImage, nil)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, testEnv)

	empty := filepath.Join(t.TempDir(), "empty.img")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	t.Setenv(testEnv, empty)
	_, err = LoadImage("pkg", testEnv, embeddedImage, nil)
	require.ErrorContains(t, err, "is empty")
}
