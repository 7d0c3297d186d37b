// Package collective is intranode's intra-node communicator: a group of 2 to
// 8 ranks on one host, one device each, that rendezvous through a store,
// share symmetric memory, and all-reduce device buffers with kernels that
// beat the vendor library on small and medium messages.
//
//	c, err := collective.New(st, rank, world, collective.Options{})
//	if err := c.Rendezvous(ctx); err != nil { … } // refusals match ErrWorldSize, ErrTopology, …
//	algo := c.SelectAllReduceAlgo(count, backend.BFloat16)
//	w, err := c.AllReduce(ctx, stream, buf, count, backend.BFloat16, backend.Sum, algo)
//	err = w.Synchronize(ctx)
//
// Algorithms: OneShot (every rank reduces everything), TwoShot
// (reduce-scatter then all-gather) and HCM (hybrid cube mesh). None means
// "use the fallback": the backend's own all-reduce where it has one (NCCL
// on CUDA), otherwise the comm's kernels chunk by chunk.
//
// The fake backend's kernels live in kernels/cpu; this package imports it so
// that any program using collective with the fake backend has them.
package collective
