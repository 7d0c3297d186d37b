package hipkernels

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/kernels"
)

// sources are the files the Makefile digests, in its order.
var sources = []string{"collectives.hip", "port_hip.h", "../cuda/intranode.cuh", "../cuda/entry.cuh"}

// sourceDigest recomputes what the Makefile writes to collectives.hsaco.sha256.
func sourceDigest(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	for _, n := range sources {
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestImageIsFresh(t *testing.T) {
	require.Equal(t, sourceDigest(t), SourceDigest(),
		"kernels/hip/collectives.hsaco.gz is older than its sources: run make -C kernels/hip")
}

// The Makefile must digest every file collectives.hip includes, directly or
// through the CUDA sources it shares.
func TestDigestCoversIncludes(t *testing.T) {
	src, err := os.ReadFile("collectives.hip")
	require.NoError(t, err)
	for _, inc := range []string{`#include "port_hip.h"`, `#include "../cuda/intranode.cuh"`, `#include "../cuda/entry.cuh"`} {
		require.Contains(t, string(src), inc)
	}
	mk, err := os.ReadFile("Makefile")
	require.NoError(t, err)
	require.Contains(t, string(mk), "SOURCES := collectives.hip port_hip.h ../cuda/intranode.cuh ../cuda/entry.cuh")
}

func TestImageIsBundleForMI200AndMI300(t *testing.T) {
	img := Image()
	require.True(t, bytes.HasPrefix(img, []byte(bundleMagic)), "not a clang offload bundle")
	archs, err := Architectures(img)
	require.NoError(t, err)
	require.Contains(t, archs, "gfx90a")
	require.True(t, slices.ContainsFunc(archs, func(a string) bool { return len(a) >= 5 && a[:5] == "gfx94" }),
		"no MI300 (gfx94x) code object in %v", archs)
	// Every kernel of the ABI is in the image (the names are plain strings
	// in each code object's symbol table).
	for _, k := range kernels.KernelNames() {
		require.True(t, bytes.Contains(img, []byte(k+"\x00")), "kernel %s missing", k)
	}
}

func TestImageIsACopy(t *testing.T) {
	a := Image()
	a[0] ^= 0xff
	require.Equal(t, byte('_'), Image()[0])
}

func TestLoadEmbedded(t *testing.T) {
	t.Setenv(EnvImage, "")
	b, err := Load()
	require.NoError(t, err)
	require.Equal(t, Image(), b)
}

func TestLoadOverrideGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte("inflated"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	path := filepath.Join(t.TempDir(), "k.hsaco.gz")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	t.Setenv(EnvImage, path)
	b, err := Load()
	require.NoError(t, err)
	require.Equal(t, []byte("inflated"), b)
}

func TestArchitecturesOfBareCodeObject(t *testing.T) {
	elf := make([]byte, elfHeaderLen)
	copy(elf, "\x7fELF")
	binary.LittleEndian.PutUint16(elf[elfMachOff:], emAMDGPU)
	binary.LittleEndian.PutUint32(elf[elfFlagsOff:], 0x54c) // gfx942, sramecc any, xnack off
	archs, err := Architectures(elf)
	require.NoError(t, err)
	require.Equal(t, []string{"gfx942"}, archs)

	binary.LittleEndian.PutUint16(elf[elfMachOff:], 62) // x86-64
	_, err = Architectures(elf)
	require.ErrorContains(t, err, "not AMDGPU")
	_, err = Architectures([]byte("garbage"))
	require.ErrorContains(t, err, "neither a clang offload bundle nor an ELF code object")
}

func TestArchitecturesRejectsBrokenBundles(t *testing.T) {
	img := Image()
	_, err := Architectures(img[:len(bundleMagic)+4])
	require.ErrorContains(t, err, "bundle header")
	bad := bytes.Clone(img)
	binary.LittleEndian.PutUint64(bad[len(bundleMagic)+8:], uint64(len(img))+1) // first entry's offset
	_, err = Architectures(bad)
	require.ErrorContains(t, err, "outside the image")
}
