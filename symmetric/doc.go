// Package symmetric gives a group of processes on one host memory that
// every rank can address: each rank allocates a block of the same size on
// its own device, the group rendezvouses through a store, and every rank
// maps every peer's block. Each block is a buffer followed by a signal pad
// whose flags the built-in kernels use for barriers and point-to-point
// signals (see package kernels for the layout).
//
// The stores the ranks meet through are in symmetric/store; descriptors of
// shareable allocations travel between processes through the Unix-socket
// channel of symmetric/ipc, or, where the backend supports fabric handles,
// as bytes through the store. Ranks that share one process (goroutines as
// ranks) share descriptors directly. A rank maps only the peers whose
// device its own can access (Backend.PeerAccess); if any pair fails, every
// rank's rendezvous fails alike with ErrPeerAccess, naming the pairs.
//
// A typical rank:
//
//	blk, err := symmetric.Alloc(ctx, b, dev, 10<<20)
//	mem, err := blk.Rendezvous(ctx, "my-group", symmetric.GroupInfo{Rank: r, World: w, Store: st})
//	defer mem.Close()
//	err = mem.Barrier(ctx, 0)
package symmetric
