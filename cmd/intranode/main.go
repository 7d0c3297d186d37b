// Command intranode inspects, proves and measures intra-node communication
// on the host's accelerators:
//
//	intranode topo          link matrix, topology, peer access, fabric, multicast
//	intranode bench         collective latency and bandwidth, nccl-tests style
//	intranode conformance   the backend conformance suite
//	intranode soak          random collectives for a while, results checked, faults injected
//	intranode doctor        driver, library and IPC health with hints
//	intranode version
//
// Every command takes --backend (default auto: the best available; the fake
// backend is always built in, cuda and rocm need build tags of those names).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/intranode/intranode/conformance"
)

func main() {
	// A conformance child process runs its case and exits here.
	conformance.MaybeChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
