package hipkernels

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/intranode/intranode/kernels"
)

// EnvImage names the environment variable that replaces the embedded image
// with a file (a code object bundle or a bare code object, gzip'd or not),
// for trying kernel changes, or architectures the embedded image lacks,
// without rebuilding the Go program.
const EnvImage = "INTRANODE_HIP_KERNELS"

// bundleMagic starts a clang offload bundle.
const bundleMagic = "__CLANG_OFFLOAD_BUNDLE__"

//go:embed collectives.hsaco.gz
var compressed []byte

//go:embed collectives.hsaco.sha256
var digest string

// The embedded image is inflated once, on first use.
var embedded struct {
	once sync.Once
	img  []byte
	err  error
}

// Image returns a copy of the embedded code object bundle, inflated. It
// panics if the embedded bytes are not gzip (a broken build); the tests
// check that they are.
func Image() []byte {
	embedded.once.Do(func() { embedded.img, embedded.err = gunzip(compressed) })
	if embedded.err != nil {
		panic(fmt.Sprintf("hipkernels: embedded image: %v", embedded.err))
	}
	return bytes.Clone(embedded.img)
}

// SourceDigest is the hex sha256 of the kernel sources the embedded image was
// built from: collectives.hip, port_hip.h, ../cuda/intranode.cuh and
// ../cuda/entry.cuh, concatenated in that order.
func SourceDigest() string { return strings.TrimSpace(digest) }

// Load returns the image the ROCm backend should load: the file named by
// $INTRANODE_HIP_KERNELS when that is set (inflated if it is gzip'd), the
// embedded bundle otherwise.
func Load() ([]byte, error) {
	return kernels.LoadImage("hipkernels", EnvImage, Image, func(b []byte) ([]byte, error) {
		if isGzip(b) {
			return gunzip(b)
		}
		return b, nil
	})
}

// Architectures lists the GPU architectures an image has code for ("gfx90a",
// "gfx940", …): the targets of a clang offload bundle, or the one target of
// a bare AMDGPU code object (read from its ELF header). Target features
// such as ":xnack-" are kept.
func Architectures(image []byte) ([]string, error) {
	if bytes.HasPrefix(image, []byte(bundleMagic)) {
		return bundleArchitectures(image)
	}
	return elfArchitecture(image)
}

func bundleArchitectures(image []byte) ([]string, error) {
	r := bytes.NewReader(image[len(bundleMagic):])
	var n uint64
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("hipkernels: bundle header: %w", err)
	}
	if n > 1024 {
		return nil, fmt.Errorf("hipkernels: bundle claims %d entries", n)
	}
	var archs []string
	for i := range n {
		var hdr [3]uint64 // offset, size, triple length
		if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
			return nil, fmt.Errorf("hipkernels: bundle entry %d: %w", i, err)
		}
		if hdr[0] > uint64(len(image)) || hdr[1] > uint64(len(image))-hdr[0] {
			return nil, fmt.Errorf("hipkernels: bundle entry %d lies outside the image", i)
		}
		if hdr[2] > 4096 {
			return nil, fmt.Errorf("hipkernels: bundle entry %d has a %d-byte target", i, hdr[2])
		}
		triple := make([]byte, hdr[2])
		if _, err := io.ReadFull(r, triple); err != nil {
			return nil, fmt.Errorf("hipkernels: bundle entry %d target: %w", i, err)
		}
		// Device entries read "hipv4-amdgcn-amd-amdhsa--gfx90a[:feature±]";
		// the host entry has no device code.
		if _, arch, ok := strings.Cut(string(triple), "amdgcn-amd-amdhsa--"); ok && hdr[1] > 0 {
			archs = append(archs, arch)
		}
	}
	if len(archs) == 0 {
		return nil, fmt.Errorf("hipkernels: bundle holds no AMDGPU code object")
	}
	return archs, nil
}

// ELF e_machine EM_AMDGPU and the e_flags mask of the target (EF_AMDGPU_MACH).
const (
	emAMDGPU     = 224
	efMachMask   = 0xff
	elfFlagsOff  = 48
	elfMachOff   = 18
	elfHeaderLen = 64
)

// amdgpuMach names the EF_AMDGPU_MACH values of the CDNA parts intranode
// targets (llvm/BinaryFormat/ELF.h).
var amdgpuMach = map[uint32]string{
	0x030: "gfx908", 0x03f: "gfx90a", 0x040: "gfx940", 0x04b: "gfx941", 0x04c: "gfx942", 0x04f: "gfx950",
}

func elfArchitecture(image []byte) ([]string, error) {
	if len(image) < elfHeaderLen || string(image[:4]) != "\x7fELF" {
		return nil, fmt.Errorf("hipkernels: image is neither a clang offload bundle nor an ELF code object")
	}
	if m := binary.LittleEndian.Uint16(image[elfMachOff:]); m != emAMDGPU {
		return nil, fmt.Errorf("hipkernels: ELF machine %d is not AMDGPU", m)
	}
	mach := binary.LittleEndian.Uint32(image[elfFlagsOff:]) & efMachMask
	if name, ok := amdgpuMach[mach]; ok {
		return []string{name}, nil
	}
	return []string{fmt.Sprintf("amdgpu-mach-%#x", mach)}, nil
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(zr)
}
