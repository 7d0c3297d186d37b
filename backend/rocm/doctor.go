//go:build rocm

package rocm

import (
	"context"
	"fmt"
	"strings"

	"github.com/intranode/intranode/backend"
)

// kernelWallClockKHz is the wall_clock64() rate the HIP kernels' deadlines
// assume (INTRANODE_WALL_CLOCK_MHZ in kernels/hip/port_hip.h).
const kernelWallClockKHz = 100_000

// Diagnostics reports what `intranode doctor` shows beyond the portable
// checks: the HIP runtime, the SMI library, RCCL, each device's architecture,
// wavefront size and kernel clock, how shareable memory travels, what the
// SMI library says about each pair and how each pair's peer access was
// decided.
func (b *Backend) Diagnostics(ctx context.Context) []backend.Diagnostic {
	if err := b.Probe(ctx); err != nil {
		return []backend.Diagnostic{{Check: "hip runtime", Detail: err.Error(),
			Hint: "install ROCm (libamdhip64.so) and check that a GPU is visible (rocminfo, /dev/kfd)"}}
	}
	var out []backend.Diagnostic
	v, _ := b.RuntimeVersion(ctx)
	out = append(out, backend.Diagnostic{Check: "hip runtime", OK: true, Detail: v})
	if lib, err := b.SMILibrary(ctx); err != nil {
		out = append(out, backend.Diagnostic{Check: "smi", Detail: err.Error(),
			Hint: "install amdsmi (libamd_smi.so) or rocm-smi (librocm_smi64.so); without one there is no link matrix"})
	} else {
		out = append(out, backend.Diagnostic{Check: "smi", OK: true, Detail: lib})
	}
	if v, err := b.RCCLVersion(); err != nil {
		out = append(out, backend.Diagnostic{Check: "rccl", Detail: err.Error(),
			Hint: "install RCCL (librccl.so.1) or set " + EnvRCCLLibrary + " to it; without it collective.HostGroups cannot cross hosts"})
	} else {
		out = append(out, backend.Diagnostic{Check: "rccl", OK: true, Detail: "RCCL " + v})
	}
	out = append(out, backend.Diagnostic{Check: "shareable memory", OK: true, Detail: b.share.String()})
	for i, e := range b.devices {
		check := fmt.Sprintf("device %d", i)
		detail := fmt.Sprintf("%s, %s, wavefront %d", e.info.Name, e.info.Architecture, e.warpSize)
		d := backend.Diagnostic{Check: check, OK: true, Detail: detail}
		switch {
		case e.wallClockKHz == 0:
			d.Detail += ", kernel clock rate unknown (ROCm 5)"
		case e.wallClockKHz != kernelWallClockKHz:
			d.OK = false
			d.Detail += fmt.Sprintf(", wall clock %d kHz", e.wallClockKHz)
			d.Hint = fmt.Sprintf("the kernels assume %d kHz: rebuild kernels/hip with -DINTRANODE_WALL_CLOCK_MHZ=%d or their timeouts are off", kernelWallClockKHz, e.wallClockKHz/1000)
		default:
			d.Detail += fmt.Sprintf(", wall clock %d MHz", e.wallClockKHz/1000)
		}
		if strings.HasSuffix(e.info.Architecture, "?") {
			d.Hint = strings.TrimSpace(d.Hint + " the kernel driver's topology (" + kfdTopology + ") is unreadable: the architecture's stepping is a guess")
		}
		out = append(out, d)
		if ok, err := b.FabricSupported(ctx, i); err != nil {
			out = append(out, backend.Diagnostic{Check: fmt.Sprintf("ipc handles %d", i), Detail: err.Error()})
		} else if b.share.kind == backend.HandleFabric {
			detail := "export OK"
			if !ok {
				detail = b.FabricReason(i)
			}
			out = append(out, backend.Diagnostic{Check: fmt.Sprintf("ipc handles %d", i), OK: ok, Detail: detail})
		}
	}
	if pairs, err := b.Links(ctx); err == nil {
		for _, p := range pairs {
			detail := fmt.Sprintf("P2P %v, %s, %d hop(s): %d link(s) counted", p.P2P, p.Type, p.Hops, p.Links)
			out = append(out, backend.Diagnostic{Check: fmt.Sprintf("link %d->%d", p.From, p.To), OK: true, Detail: detail})
		}
	}
	n := len(b.devices)
	out = append(out, backend.PeerTestDiagnostics(ctx, b, n)...)
	return out
}

var _ backend.Diagnoser = (*Backend)(nil)
