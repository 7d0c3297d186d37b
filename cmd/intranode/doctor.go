package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
	"github.com/intranode/intranode/symmetric/ipc"
)

func runDoctor(ctx context.Context, args []string, s streams) error {
	var c common
	fs := newFlags("doctor", s)
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var diags []backend.Diagnostic
	add := func(d backend.Diagnostic) { diags = append(diags, d) }
	b, err := backend.Open(ctx, c.backend)
	if err != nil {
		add(backend.Diagnostic{Check: "backend", Detail: err.Error(),
			Hint: "build with -tags cuda or -tags rocm for GPUs; --backend fake always works"})
		return printDiagnostics(s, diags, *asJSON)
	}
	defer b.Close()
	if err := b.Probe(ctx); err != nil {
		add(backend.Diagnostic{Check: "backend " + b.Name(), Detail: err.Error(), Hint: "install the driver or pick another --backend"})
		return printDiagnostics(s, diags, *asJSON)
	}
	add(backend.Diagnostic{Check: "backend", OK: true, Detail: b.Name()})
	if d, ok := b.(backend.Diagnoser); ok {
		diags = append(diags, d.Diagnostics(ctx)...)
	}
	rep, err := collectTopo(ctx, b)
	if err != nil {
		add(backend.Diagnostic{Check: "topology", Detail: err.Error(), Hint: "the vendor management library failed; see the error"})
		return printDiagnostics(s, diags, *asJSON)
	}
	for _, d := range rep.Devices {
		add(backend.Diagnostic{Check: fmt.Sprintf("device %d", d.Index), OK: true,
			Detail: fmt.Sprintf("%s, %s, bus %s, %d GiB", d.Name, d.Architecture, d.PCIBusID, d.MemoryBytes>>30)})
	}
	topoOK := rep.Topology != connectivity.Unknown || len(rep.Devices) < 2
	add(backend.Diagnostic{Check: "topology", OK: topoOK, Detail: rep.Topology.String(),
		Hint: "groups of these devices fall back to the vendor library; pick a fully connected subset"})
	for i := range rep.PeerAccess {
		for j, a := range rep.PeerAccess[i] {
			if i == j || rep.Matrix.At(i, j) == 0 {
				continue
			}
			detail := a.String()
			if t, ok := b.(backend.PeerTester); ok && a == connectivity.AccessNo {
				if d, err := t.PeerTest(ctx, i, j); err == nil && d.Reason != "" {
					detail += ": " + d.Reason
				}
			}
			add(backend.Diagnostic{Check: fmt.Sprintf("peer access %d->%d", i, j), OK: a == connectivity.AccessYes,
				Detail: detail, Hint: "linked devices without working peer access: check IOMMU/ACS settings and the driver; rendezvous refuses groups that use them"})
		}
	}
	for i := range rep.Devices {
		add(backend.Diagnostic{Check: fmt.Sprintf("fabric handles %d", i), OK: true, Detail: yesNo(rep.Fabric[i]) + " (file descriptors otherwise)"})
		add(backend.Diagnostic{Check: fmt.Sprintf("multicast %d", i), OK: true, Detail: yesNo(rep.Multicast[i]) + " (reported only; never used)"})
	}
	add(ipcCheck(ctx))
	return printDiagnostics(s, diags, *asJSON)
}

// ipcCheck passes a descriptor to this process through the IPC channel,
// as ranks do in a rendezvous.
func ipcCheck(ctx context.Context) backend.Diagnostic {
	d := backend.Diagnostic{Check: "ipc socket", Hint: "abstract Unix sockets must be usable (same network namespace for all ranks)"}
	nonce, err := ipc.NewNonce()
	if err != nil {
		d.Detail = err.Error()
		return d
	}
	ch, err := ipc.Listen(nonce)
	if err != nil {
		d.Detail = err.Error()
		return d
	}
	defer ch.Close()
	pid := os.Getpid()
	ch.SetPeers([]int{pid})
	fd, err := unix.MemfdCreate("intranode-doctor", unix.MFD_CLOEXEC)
	if err != nil {
		d.Detail = err.Error()
		return d
	}
	defer unix.Close(fd)
	if err := ch.SendFD(ctx, pid, "doctor", fd); err != nil {
		d.Detail = err.Error()
		return d
	}
	got, err := ch.RecvFD(ctx, pid, "doctor")
	if err != nil {
		d.Detail = err.Error()
		return d
	}
	_ = unix.Close(got)
	d.OK, d.Detail = true, "descriptor passed with credentials checked"
	return d
}

func printDiagnostics(s streams, diags []backend.Diagnostic, asJSON bool) error {
	problems := 0
	for _, d := range diags {
		if !d.OK {
			problems++
		}
	}
	if asJSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(diags); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(s.Out, 0, 0, 2, ' ', 0)
		for _, d := range diags {
			mark := "ok"
			if !d.OK {
				mark = "PROBLEM"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", mark, d.Check, d.Detail)
			if !d.OK && d.Hint != "" {
				fmt.Fprintf(tw, "\t\thint: %s\n", d.Hint)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if problems > 0 {
		return fmt.Errorf("%d problem(s) found", problems)
	}
	return nil
}
