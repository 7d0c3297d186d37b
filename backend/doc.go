// Package backend is intranode's hardware-abstraction layer: the contract
// that the CUDA, ROCm, fake and plugin backends implement, and the registry
// through which programs pick one.
//
// A Backend enumerates the devices of one host and reports how they are
// linked; a Device allocates memory (plain, shareable across processes, or
// host-mapped), copies, runs kernels on Streams and captures them into
// Graphs. Everything above this package — symmetric memory, collectives,
// the conformance suite — is written against these interfaces only.
//
// Backends register themselves from init; users blank-import the ones they
// want (the fake is always built in; cuda and rocm need build tags of the
// same name):
//
//	import _ "github.com/intranode/intranode/backend/fake"
//	b, err := backend.Open(ctx, "auto")
//
// Errors carry a Code; test them with errors.Is against ErrTimeout,
// ErrNotSupported and the other sentinels.
package backend
