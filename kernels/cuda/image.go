package cudakernels

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"strings"
)

// EnvImage names the environment variable that replaces the embedded image
// with a file (a fatbin, cubin or PTX that cuModuleLoadData accepts), for
// trying kernel changes without rebuilding the Go program.
const EnvImage = "INTRANODE_CUDA_KERNELS"

//go:embed collectives.fatbin
var image []byte

//go:embed collectives.fatbin.sha256
var digest string

// Image returns a copy of the embedded fatbin.
func Image() []byte { return bytes.Clone(image) }

// SourceDigest is the hex sha256 of the kernel sources (every *.cu, *.cuh
// and *.h file of kernels/cuda, sorted by name and concatenated) that the
// embedded image was built from.
func SourceDigest() string { return strings.TrimSpace(digest) }

// Load returns the image the CUDA backend should load: the file named by
// $INTRANODE_CUDA_KERNELS when that is set, the embedded fatbin otherwise.
func Load() ([]byte, error) {
	path := os.Getenv(EnvImage)
	if path == "" {
		return Image(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cudakernels: %s: %w", EnvImage, err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("cudakernels: %s: %s is empty", EnvImage, path)
	}
	return b, nil
}
