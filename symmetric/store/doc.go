// Package store is the key-value rendezvous the ranks of a group use to find
// each other before any device memory is shared, as c10d's Store is for
// PyTorch: ranks publish small values (hostnames, device indexes, memory
// handles) under agreed keys and wait for each other's.
//
// Three implementations share the Store contract and one test suite
// (package storetest):
//
//   - Mem, an in-process map whose waiters sleep until the Set they wait
//     for; for ranks that are goroutines of one process, and the heart of
//     the TCP server.
//   - File, a directory shared by the processes of one host, with no
//     server: one file per key, written atomically by rename, counters
//     updated under an flock, readers polling with backoff.
//   - TCP: one rank runs a Server (ListenTCP, loopback by default) and every
//     rank connects with DialTCP. One connection multiplexes concurrent
//     calls; blocked Gets wait on the server, which bounds frame sizes,
//     in-flight requests and keys so a misbehaving client cannot exhaust it.
//     With a per-job secret (WithSecret or INTRANODE_STORE_SECRET) client
//     and server prove to each other that they hold it, by HMAC-SHA256
//     challenge-response, before any key is read or written.
//
// Exchange builds the collectives the rest of intranode needs on any Store:
// AllGather, Barrier, Broadcast and AllGatherValue, with keys
// "<prefix>/<seq>/<rank>" and a sequence number bumped on every call so a
// round never reads a stale value, and with finished rounds deleted so a
// long job does not grow the store.
//
// Every blocking call takes a context and ends, at the latest, after the
// store's timeout (WithTimeout, five minutes by default) with an error
// matching backend.ErrTimeout. Errors carry backend codes: ErrClosed after
// Close, ErrPeerFailed when a TCP server goes away, ErrInvalidArgument for
// bad input, ErrOutOfMemory when a store is full.
package store
