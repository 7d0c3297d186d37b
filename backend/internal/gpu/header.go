package gpu

import _ "embed"

// ShimHeader is shim.h, the C declarations the backends' shims share, for
// tests that compile those shims' headers away from the source tree.
//
//go:embed shim.h
var ShimHeader []byte
