package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/conformance"
	"github.com/intranode/intranode/symmetric/store"
)

// The paths bench --hosts measures.
const (
	hostsHier = "hier" // inside each host through its Comm, then across hosts
	hostsFlat = "flat" // the inter-host engine across every rank
	hostsAuto = "auto" // HostGroups' own choice by size (JoinHosts' Flat windows)
)

// benchHostsFlags checks the flags of bench --hosts and returns the paths
// to measure; nil when hosts is 1 (the ordinary bench).
func benchHostsFlags(hosts, world int, algoS, collS string, graph, share bool) ([]string, error) {
	switch {
	case hosts == 1:
		return nil, nil
	case hosts < 1 || world%hosts != 0:
		return nil, fmt.Errorf("%w: --hosts %d must divide --world %d", errUsage, hosts, world)
	case graph || share:
		return nil, fmt.Errorf("%w: --hosts measures eager calls of every rank on its own device (no --graph, no --share-device)", errUsage)
	}
	colls, err := parseColls(collS)
	if err != nil {
		return nil, err
	}
	for _, c := range colls {
		if c != collective.OpAllReduce && c != collective.OpReduceScatter && c != collective.OpAllGather {
			return nil, fmt.Errorf("%w: --hosts measures all_reduce, reduce_scatter and all_gather, not %v", errUsage, c)
		}
	}
	if algoS == "all" {
		return []string{hostsHier, hostsFlat, hostsAuto}, nil
	}
	algos := strings.Split(algoS, ",")
	for _, a := range algos {
		if a != hostsHier && a != hostsFlat && a != hostsAuto {
			return nil, fmt.Errorf("%w: with --hosts, --algo takes hier, flat and auto, not %q", errUsage, a)
		}
	}
	return algos, nil
}

// benchHostsRank measures the collectives across simulated hosts on one
// rank: for each size, the hierarchical and the flat path, each checked
// once exactly, then timed by the wall clock over eager calls (the median
// of the replays; each replay starts after a one-element all-reduce that
// lines the ranks up).
func benchHostsRank(ctx context.Context, cfg benchConfig, rank int, st store.Store, b backend.Backend, emit func(benchSample) error) error {
	dev := rank
	start := time.Now()
	h, err := collective.JoinHosts(ctx, st, rank, cfg.World, collective.Options{Backend: b, Device: &dev,
		Hostname: conformance.SimulatedHost(rank, cfg.World, cfg.Hosts), BufferSize: cfg.BufferSize, Timeout: cfg.Timeout})
	if err != nil {
		return err
	}
	defer h.Close()
	h.NoCallCheck = cfg.NoCallCheck
	// JoinHosts is this rank's rendezvous (its host's Comm among them).
	if err := emit(benchSample{Rank: rank, Algo: rendezvousSample, TimeUS: float64(time.Since(start).Nanoseconds()) / 1e3}); err != nil {
		return err
	}
	d, err := h.Device(ctx)
	if err != nil {
		return err
	}
	in, out, s, release, err := benchBuffers(ctx, d, slices.Max(cfg.Sizes))
	if err != nil {
		return err
	}
	defer release()
	wait := func(w *collective.HostWork, err error) error {
		if err != nil {
			return err
		}
		return w.Synchronize(ctx)
	}
	line := func() error { return wait(h.AllReduce(ctx, s, in.Ptr(), out.Ptr(), 1, backend.Float32, backend.Max)) }
	auto := h.Flat
	for _, coll := range cfg.Colls {
		div := sizeDivisor(coll, cfg.World)
		for _, size := range cfg.Sizes {
			count := size / cfg.DType.Size() / div
			if count == 0 {
				continue
			}
			call := func() (*collective.HostWork, error) {
				switch coll {
				case collective.OpReduceScatter:
					return h.ReduceScatter(ctx, s, in.Ptr(), out.Ptr(), count, cfg.DType, cfg.Op)
				case collective.OpAllGather:
					return h.AllGather(ctx, s, in.Ptr(), out.Ptr(), count, cfg.DType)
				}
				return h.AllReduce(ctx, s, in.Ptr(), out.Ptr(), count, cfg.DType, cfg.Op)
			}
			for _, name := range cfg.Algos {
				switch name {
				case hostsHier:
					h.Flat = nil
				case hostsFlat:
					h.Flat = map[collective.Op][]collective.Window{coll: {{}}} // every size
				default:
					h.Flat = auto
				}
				smp := benchSample{Coll: coll.String(), Rank: rank, Bytes: count * div * cfg.DType.Size(), Algo: name}
				if cfg.Op == backend.Sum {
					if err := conformance.CheckHostCollective(ctx, h, d, coll, cfg.DType, count, size, false); err != nil {
						return fmt.Errorf("%v %d bytes %s: %w", coll, size, name, err)
					}
				}
				for range cfg.Warmup {
					if err := wait(call()); err != nil {
						return err
					}
				}
				times := make([]float64, 0, cfg.Replays)
				for range cfg.Replays {
					if err := line(); err != nil {
						return err
					}
					start := time.Now()
					var last *collective.HostWork
					for range cfg.Iters {
						if last, err = call(); err != nil {
							return err
						}
					}
					if err := last.Synchronize(ctx); err != nil {
						return err
					}
					times = append(times, float64(time.Since(start).Nanoseconds())/1e3/float64(cfg.Iters))
				}
				slices.Sort(times)
				smp.TimeUS = times[len(times)/2]
				if err := emit(smp); err != nil {
					return err
				}
			}
		}
	}
	return line()
}
