// Package ncclapi is the NCCL-API library's Go side: built with
// cmd/libintranode-nccl into libintranode-nccl.so, put in front of the
// real NCCL with LD_PRELOAD, it runs the all-reduces, reduce-scatters,
// all-gathers, broadcasts and all-to-alls (ncclAlltoAll) of a
// communicator on intranode's kernels
// where intranode's own selection says they win, and hands every other
// call to the real NCCL unchanged (docs/NCCL.md).
//
// The C side (ncclapi.c, forward.c) loads the real library, forwards, and
// keeps NCCL's group state per thread; this package decides. A
// communicator is bootstrapped at its first eligible call, over the NCCL
// communicator itself (internal/ncclboot): no server, port or variable of
// its own. Without cgo the package is empty.
package ncclapi
