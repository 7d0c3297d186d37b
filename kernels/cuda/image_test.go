package cudakernels

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// sourceDigest recomputes what the Makefile writes to
// collectives.fatbin.sha256: sha256 over the *.cu, *.cuh and *.h files of
// dir, sorted by name and concatenated.
func sourceDigest(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".cu", ".cuh", ".h":
			if e.Type().IsRegular() {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	require.NotEmpty(t, names, "no kernel sources in %s", dir)
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		require.NoError(t, err)
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestImageIsFresh(t *testing.T) {
	require.Equal(t, sourceDigest(t, "."), SourceDigest(),
		"kernels/cuda/collectives.fatbin is older than its sources: run make kernels")
}

// The fatbin container starts with a 16-byte header: magic 0xBA55ED50,
// version (u16), header size (u16), size of what follows (u64).
func TestImageIsFatbin(t *testing.T) {
	img := Image()
	require.GreaterOrEqual(t, len(img), 16, "collectives.fatbin is too short")
	require.Equal(t, uint32(0xBA55ED50), binary.LittleEndian.Uint32(img[0:4]), "fatbin magic")
	headerSize := int(binary.LittleEndian.Uint16(img[6:8]))
	fatSize := binary.LittleEndian.Uint64(img[8:16])
	require.GreaterOrEqual(t, headerSize, 16)
	require.NotZero(t, fatSize, "fatbin holds no images")
	require.LessOrEqual(t, uint64(headerSize)+fatSize, uint64(len(img)), "fatbin is truncated")
}

func TestImageIsACopy(t *testing.T) {
	a := Image()
	a[0] ^= 0xff
	require.Equal(t, byte(0x50), Image()[0])
}

func TestLoadEmbedded(t *testing.T) {
	t.Setenv(EnvImage, "")
	b, err := Load()
	require.NoError(t, err)
	require.Equal(t, Image(), b)
}

func TestLoadOverride(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.cubin")
	require.NoError(t, os.WriteFile(path, []byte("override"), 0o600))
	t.Setenv(EnvImage, path)
	b, err := Load()
	require.NoError(t, err)
	require.Equal(t, []byte("override"), b)
}
