// Package capi is the Go side of intranode's C interface: communicators
// named by opaque handles, made from a unique id (as NCCL's are) or from a
// store, the five collectives on the caller's stream with raw device
// pointers, error codes, asynchronous errors, abort. The cgo layers
// (package cabi for include/intranode.h, package ncclapi for the NCCL-API
// library) convert C arguments and call it; every decision about
// arguments, streams and errors is made here, in Go, once.
//
// A Comm wraps one collective.Comm; it is not a second implementation of
// anything collective does.
package capi
