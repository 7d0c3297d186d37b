package cudakernels

import (
	"bytes"
	_ "embed"
	"strings"

	"github.com/intranode/intranode/kernels"
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
func Load() ([]byte, error) { return kernels.LoadImage("cudakernels", EnvImage, Image, nil) }
