package fake

import (
	"fmt"
	"strings"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// Preset names a link layout for the fake devices.
type Preset string

// The presets.
const (
	// PresetFull links every pair of devices with LinksPerPair links.
	PresetFull Preset = "full"
	// PresetHCM is the DGX-1 hybrid cube mesh (exactly 8 devices): quads
	// {0,1,2,3} and {4,5,6,7} fully connected inside, and i linked to i+4,
	// with the NVLink counts of a DGX-1 with V100s (6 links per device).
	PresetHCM Preset = "hcm"
	// PresetRing links i with i+1 and i-1 (mod n).
	PresetRing Preset = "ring"
	// PresetPairs links 0-1, 2-3, …; with an odd count the last device has
	// no link.
	PresetPairs Preset = "pairs"
	// PresetNone has no links: devices reach each other over PCIe only, so
	// no pair has peer access.
	PresetNone Preset = "none"
)

// LinksPerPair is the link count of a linked pair in every preset but
// PresetHCM.
const LinksPerPair = 12

// Presets lists every preset.
func Presets() []Preset {
	return []Preset{PresetFull, PresetHCM, PresetRing, PresetPairs, PresetNone}
}

// hcmDevices is the size of a hybrid cube mesh.
const hcmDevices = 8

// hcmLinks returns the NVLink counts between the GPUs of a DGX-1 (V100), as
// nvidia-smi topo -m shows them: upper triangle, [i][j] for i < j.
func hcmLinks() [hcmDevices][hcmDevices]int {
	return [hcmDevices][hcmDevices]int{
		0: {1: 1, 2: 1, 3: 2, 4: 2},
		1: {2: 2, 3: 1, 5: 2},
		2: {3: 2, 6: 1},
		3: {7: 1},
		4: {5: 1, 6: 1, 7: 2},
		5: {6: 2, 7: 1},
		6: {7: 2},
	}
}

// ParsePreset parses a preset name (case-insensitive). The error matches
// backend.ErrInvalidArgument and lists the presets.
func ParsePreset(s string) (Preset, error) {
	p := Preset(strings.ToLower(strings.TrimSpace(s)))
	all := Presets()
	for _, q := range all {
		if p == q {
			return p, nil
		}
	}
	names := make([]string, len(all))
	for i, q := range all {
		names[i] = string(q)
	}
	return "", backend.Errorf(backend.CodeInvalidArgument, "fake: unknown topology preset %q (want one of %s)", s, strings.Join(names, ", "))
}

// Matrix returns the link matrix of the preset for n devices. PresetHCM
// needs n == 8.
func (p Preset) Matrix(n int) (connectivity.Matrix, error) {
	if n < 1 {
		return connectivity.Matrix{}, backend.Errorf(backend.CodeInvalidArgument, "fake: topology for %d devices", n)
	}
	m := connectivity.NewMatrix(connectivity.LinkShared, n)
	link := func(i, j, c int) {
		if i != j {
			m.Set(i, j, c)
			m.Set(j, i, c)
		}
	}
	switch p {
	case PresetFull:
		for i := range n {
			for j := i + 1; j < n; j++ {
				link(i, j, LinksPerPair)
			}
		}
	case PresetHCM:
		if n != hcmDevices {
			return connectivity.Matrix{}, backend.Errorf(backend.CodeInvalidArgument,
				"fake: topology %q needs exactly %d devices, have %d", p, hcmDevices, n)
		}
		for i, row := range hcmLinks() {
			for j, c := range row {
				if c > 0 {
					link(i, j, c)
				}
			}
		}
	case PresetRing:
		for i := range n {
			link(i, (i+1)%n, LinksPerPair)
		}
	case PresetPairs:
		for i := 0; i+1 < n; i += 2 {
			link(i, i+1, LinksPerPair)
		}
	case PresetNone:
	default:
		_, err := ParsePreset(string(p))
		return connectivity.Matrix{}, err
	}
	if err := m.Validate(); err != nil {
		return connectivity.Matrix{}, backend.Wrap(backend.CodeInternal, err, fmt.Sprintf("fake: preset %q", p))
	}
	return m, nil
}
