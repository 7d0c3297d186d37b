//go:build cuda

package cuda

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/intranode/intranode/backend"
)

// DriverVersion is the installed NVIDIA driver as the CUDA driver API and
// NVML report it.
type DriverVersion struct {
	// CUDA is cuDriverGetVersion's answer: 1000*major + 10*minor of the
	// newest CUDA version the driver supports (12080 is 12.8).
	CUDA int `json:"cuda"`
	// Driver is NVML's driver version string ("580.159"), empty when NVML
	// is unavailable.
	Driver string `json:"driver,omitempty"`
}

// CUDAString formats CUDA as "major.minor".
func (v DriverVersion) CUDAString() string {
	return fmt.Sprintf("%d.%d", v.CUDA/1000, v.CUDA%1000/10)
}

// String renders both versions.
func (v DriverVersion) String() string {
	if v.Driver == "" {
		return "CUDA " + v.CUDAString()
	}
	return fmt.Sprintf("CUDA %s, driver %s", v.CUDAString(), v.Driver)
}

// DriverVersion reports the CUDA driver API version and, when NVML is
// available, the driver version string.
func (b *Backend) DriverVersion(ctx context.Context) (DriverVersion, error) {
	if err := b.Usable(ctx); err != nil {
		return DriverVersion{}, err
	}
	v := DriverVersion{CUDA: b.version}
	if b.nvml != nil {
		s, ret := b.nvml.SystemGetDriverVersion()
		if ret != nvml.SUCCESS {
			return v, backend.Errorf(backend.CodeInternal, "cuda: NVML SystemGetDriverVersion: %v", ret)
		}
		v.Driver = s
	}
	return v, nil
}

// NVMLVersion reports the NVML library version, or an error matching
// backend.ErrUnavailable when NVML could not be loaded.
func (b *Backend) NVMLVersion(ctx context.Context) (string, error) {
	if err := b.Usable(ctx); err != nil {
		return "", err
	}
	if b.nvml == nil {
		return "", b.nvmlErr
	}
	s, ret := b.nvml.SystemGetNVMLVersion()
	if ret != nvml.SUCCESS {
		return "", backend.Errorf(backend.CodeInternal, "cuda: NVML SystemGetNVMLVersion: %v", ret)
	}
	return s, nil
}

// NVMLDevices lists the devices NVML sees, each mapped to its CUDA ordinal
// (-1 for devices CUDA does not see).
func (b *Backend) NVMLDevices(ctx context.Context) ([]NVMLDevice, error) {
	if err := b.Usable(ctx); err != nil {
		return nil, err
	}
	if b.nvml == nil {
		return nil, b.nvmlErr
	}
	devs, err := NVMLInventory(b.nvml, b.BusIDs())
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	return devs, nil
}

// Diagnostics reports what `intranode doctor` shows beyond the portable
// checks: driver, NVML and NCCL versions, each device's fabric state and why
// fabric handles are or are not used, and how each pair's peer access was
// decided.
func (b *Backend) Diagnostics(ctx context.Context) []backend.Diagnostic {
	if err := b.Usable(ctx); err != nil {
		return []backend.Diagnostic{{Check: "cuda driver", Detail: err.Error(),
			Hint: "install the NVIDIA driver (libcuda.so.1) and check that a GPU is visible (nvidia-smi)"}}
	}
	var out []backend.Diagnostic
	v, err := b.DriverVersion(ctx)
	if err != nil {
		out = append(out, backend.Diagnostic{Check: "cuda driver", Detail: err.Error()})
	} else {
		out = append(out, backend.Diagnostic{Check: "cuda driver", OK: true, Detail: v.String()})
	}
	nv, err := b.NVMLVersion(ctx)
	if err != nil {
		out = append(out, backend.Diagnostic{Check: "nvml", Detail: err.Error(),
			Hint: "libnvidia-ml.so.1 comes with the driver; without it there is no link matrix"})
	} else {
		out = append(out, backend.Diagnostic{Check: "nvml", OK: true, Detail: "NVML " + nv})
	}
	if v, err := b.NCCLVersion(); err != nil {
		out = append(out, backend.Diagnostic{Check: "nccl", Detail: err.Error(),
			Hint: "install NCCL (libnccl.so.2) or set " + EnvNCCLLibrary + " to it; without it all-reduces with algorithm None (the fallback) fail"})
	} else {
		out = append(out, backend.Diagnostic{Check: "nccl", OK: true, Detail: "NCCL " + v})
	}
	n := len(b.devices)
	for i := range n {
		check := fmt.Sprintf("fabric state %d", i)
		if _, err := b.FabricSupported(ctx, i); err != nil {
			out = append(out, backend.Diagnostic{Check: check, Detail: err.Error()})
			continue
		}
		st, reason, err := b.FabricState(ctx, i)
		switch {
		case err != nil:
			out = append(out, backend.Diagnostic{Check: check, Detail: err.Error()})
		case reason != "":
			out = append(out, backend.Diagnostic{Check: check, OK: true, Detail: st.String() + "; " + reason})
		default:
			out = append(out, backend.Diagnostic{Check: check, OK: true, Detail: st.String() + "; fabric handle round trip OK"})
		}
	}
	out = append(out, backend.PeerTestDiagnostics(ctx, b, n)...)
	return out
}

var _ backend.Diagnoser = (*Backend)(nil)
