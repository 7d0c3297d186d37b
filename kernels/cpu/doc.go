// Package cpu implements the built-in kernels of package kernels as Go
// functions, for the fake backend: the barrier, put-signal and wait-signal
// kernels and the one-shot, two-shot, hybrid-cube-mesh and pipeline
// all-reduce kernels for every element type. Each follows the algorithm
// written in package kernels' documentation step for step, so the fake
// exercises the same synchronisation as the CUDA and HIP kernels.
//
// A kernel is a Func: it reads its arguments as backend.Args, resolves
// device pointers through a Memory and runs to completion on the calling
// goroutine. Peers are other goroutines, or other processes mapping the same
// shared-memory pages; signal-pad words are only touched with sync/atomic
// (sequentially consistent, so a Store publishes every plain write before
// it to whoever Loads the value), while data moves with plain copies.
//
// Waits back off (yield first, then sleep from 1µs doubling up to 50µs) so
// that eight ranks on a two-core machine still make progress. A wait that
// passes its deadline records kernels.StatusTimeout, naming the peer and
// channel, in the status word and ends the kernel without an error, as a
// device kernel would; the host reads the word. The deadline is TimeoutNs
// after that wait began (so 0 gives up unless the signal is already
// there), as on the device. Without a status word (Status 0) a timeout is
// returned as an error matching backend.ErrTimeout instead. Invalid
// arguments record kernels.StatusBadArgs and also return an error matching
// backend.ErrInvalidArgument. Cancelling the context ends a wait with an
// error matching backend.ErrClosed.
//
// Importing the package registers the kernels with the fake backend under
// kernels.ModuleName (register.go); Kernels returns them for other hosts.
package cpu
