package collective

import (
	"context"
	"errors"
	"fmt"

	"github.com/intranode/intranode/connectivity"
)

// reaches reports whether this rank's kernels read and write peer's memory,
// so that Rendezvous checks peer access to it: every peer, except in a
// hybrid cube mesh, whose algorithm moves data only between a rank and its
// linked neighbours (three in its quad, one in the other) and whose
// unlinked pairs need not have peer access (the fake gives them none).
// Rendezvous calls it, through the symmetric memory, with c.mu held.
func (c *Comm) reaches(peer int) bool {
	if c.topo != connectivity.HybridCubeMesh || c.rank >= len(c.hcm) {
		return true
	}
	for _, p := range c.hcm[c.rank] {
		if p == peer {
			return true
		}
	}
	return false
}

// keepForFallback decides what a refused Rendezvous leaves behind; c.mu is
// held. A refusal for the topology (ErrTopology: the links, or a pair's
// peer access) on a backend with its own all-reduce keeps the device, the
// group name, a status word and a stream, so that the comm can still serve
// AllReduce with None through FallbackAllReducer, as PyTorch falls back to
// NCCL where IntraNodeComm refuses. Every rank refuses the same topology
// with the same verdict, so every rank keeps its comm and the backend's
// bootstrap (NCCL's, through the comm's store and name) finds them all.
// Kernel algorithms stay refused (usableFor). It reports whether it kept
// the comm; otherwise the caller releases everything.
func (c *Comm) keepForFallback(ctx context.Context, refusal error) bool {
	if !errors.Is(refusal, ErrTopology) || c.name == "" || c.b == nil {
		return false
	}
	if _, ok := c.b.(FallbackAllReducer); !ok {
		return false
	}
	var err error
	if c.dev == nil {
		if c.dev, err = c.b.Open(ctx, c.devIndex); err != nil {
			c.log.Debug("fallback-only comm: opening the device failed", "err", err)
			return false
		}
	}
	if err = c.openControl(ctx); err != nil {
		c.log.Debug("fallback-only comm", "err", err)
		return false
	}
	c.refused = refusal
	c.log.Debug("intra-node comm kept for the backend's all-reduce only", "group", c.name)
	return true
}

// usableFor says whether AllReduce may run algo; c.mu is held. It returns
// nil once Rendezvous has succeeded; for a comm refused for its topology
// and kept for the backend's all-reduce (keepForFallback), nil for None and
// an error matching ErrNotInitialized and ErrTopology for a kernel
// algorithm; ErrNotInitialized otherwise.
func (c *Comm) usableFor(algo Algo) error {
	switch {
	case c.initialized:
		return nil
	case c.refused == nil:
		return ErrNotInitialized
	case algo == None:
		return nil
	}
	return fmt.Errorf("%w: %v needs the comm's kernels, which rendezvous refused (only None, the %s backend's all-reduce, is available): %w",
		ErrNotInitialized, algo, c.b.Name(), c.refused)
}

// FallbackOnly reports whether Rendezvous refused the comm for its topology
// but kept it for the backend's own all-reduce: AllReduce then serves None
// through FallbackAllReducer and refuses the kernel algorithms, and
// SelectAllReduceAlgo says None.
func (c *Comm) FallbackOnly() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused != nil
}
