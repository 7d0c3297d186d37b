// Package ncclboot forms an intranode comm over an existing NCCL
// communicator: the rendezvous's exchanges travel as all-gathers of the
// real NCCL on the communicator (gatherStore), on a stream and a scratch
// buffer of their own, and a last all-gather agrees on the outcome, so
// that either every rank has the comm or none has. It needs no store,
// server, port or environment variable. The NCCL-API library (ncclapi)
// and the C interface's intranodeCommInitFromNccl (cabi) use it. Without
// cgo only the store is built.
package ncclboot
