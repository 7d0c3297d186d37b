package gpu

import "embed"

// Headers holds the C headers the backends' shims include from this
// package (shim.h, shim_decl.h, ccl.h), for tests that compile those
// shims' headers away from the source tree.
//
//go:embed shim.h shim_decl.h ccl.h
var Headers embed.FS
