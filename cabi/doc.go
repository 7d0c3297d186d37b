// Package cabi exports intranode's C interface, include/intranode.h, from
// Go: built into libintranode.so by cmd/libintranode (go build
// -buildmode=c-shared). Each export converts its C arguments and calls
// package capi, which holds the logic; nothing here decides anything.
//
// Communicators cross the boundary as C-allocated handles holding a key
// into this package's table: no Go pointer is ever stored on the C side.
//
// Without cgo (CGO_ENABLED=0) the package is empty.
package cabi
