package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// topoReport is what `topo --json` prints.
type topoReport struct {
	Backend    string                  `json:"backend"`
	Devices    []backend.DeviceInfo    `json:"devices"`
	Matrix     connectivity.Matrix     `json:"matrix"`
	Topology   connectivity.Topology   `json:"topology"`
	PeerAccess [][]connectivity.Access `json:"peer_access"`
	Fabric     []bool                  `json:"fabric"`
	Multicast  []bool                  `json:"multicast"`
}

func runTopo(ctx context.Context, args []string, s streams) error {
	var c common
	fs := newFlags("topo", s)
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	b, err := backend.Open(ctx, c.backend)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Probe(ctx); err != nil {
		return err
	}
	rep, err := collectTopo(ctx, b)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeTopo(s.Out, rep)
}

func collectTopo(ctx context.Context, b backend.Backend) (topoReport, error) {
	rep := topoReport{Backend: b.Name()}
	n, err := b.DeviceCount(ctx)
	if err != nil {
		return rep, err
	}
	for i := range n {
		info, err := b.DeviceInfo(ctx, i)
		if err != nil {
			return rep, err
		}
		rep.Devices = append(rep.Devices, info)
	}
	if rep.Matrix, err = b.LinkMatrix(ctx); err != nil {
		return rep, err
	}
	rep.Topology = connectivity.Detect(rep.Matrix)
	rep.PeerAccess = make([][]connectivity.Access, n)
	for i := range n {
		rep.PeerAccess[i] = make([]connectivity.Access, n)
		for j := range n {
			ok, err := b.PeerAccess(ctx, i, j)
			switch {
			case err != nil:
				rep.PeerAccess[i][j] = connectivity.AccessUnknown
			case ok:
				rep.PeerAccess[i][j] = connectivity.AccessYes
			default:
				rep.PeerAccess[i][j] = connectivity.AccessNo
			}
		}
		f, err := b.FabricSupported(ctx, i)
		rep.Fabric = append(rep.Fabric, err == nil && f)
		m, err := b.MulticastSupported(ctx, i)
		rep.Multicast = append(rep.Multicast, err == nil && m)
	}
	return rep, nil
}

func writeTopo(w io.Writer, rep topoReport) error {
	n := len(rep.Devices)
	bus := make([]string, n)
	mem := make([]string, n)
	fab := make([]string, n)
	mc := make([]string, n)
	for i, d := range rep.Devices {
		bus[i] = d.PCIBusID
		mem[i] = fmt.Sprintf("%d GiB", d.MemoryBytes>>30)
		fab[i] = yesNo(rep.Fabric[i])
		mc[i] = yesNo(rep.Multicast[i]) + " (unused)"
	}
	fmt.Fprintf(w, "Backend: %s, %d device(s)", rep.Backend, n)
	if n > 0 {
		fmt.Fprintf(w, ": %s", rep.Devices[0].Name)
	}
	fmt.Fprintf(w, "\nTopology of all devices: %v\n\n", rep.Topology)
	err := connectivity.WriteTable(w, rep.Matrix, connectivity.TableOptions{Columns: []connectivity.Column{
		{Header: "PCI Bus", Values: bus}, {Header: "Memory", Values: mem},
		{Header: "Fabric", Values: fab}, {Header: "Multicast", Values: mc},
	}})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\nPeer access (row reads column):")
	return connectivity.WritePeerTable(w, rep.PeerAccess)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
