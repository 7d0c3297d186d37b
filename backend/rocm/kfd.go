//go:build rocm

package rocm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// kfdTopology is where the amdgpu kernel driver (KFD) describes its nodes.
const kfdTopology = "/sys/class/kfd/kfd/topology/nodes"

// kfdArchitectures maps the normalised PCI bus ids of the GPUs the kernel
// driver describes under root to their target names ("gfx90a", "gfx942").
// HIP names the target only in hipDeviceProp_t.gcnArchName, which the
// backend does not read (its layout changed in ROCm 6), while KFD's
// gfx_target_version is plain text: major*10000 + minor*100 + stepping,
// minor and stepping spelt in hex in the name. CPU nodes (target 0) are
// skipped. A missing root gives an empty map.
func kfdArchitectures(root string) (map[string]string, error) {
	out := map[string]string{}
	nodes, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", root, err)
	}
	for _, n := range nodes {
		props, err := readProperties(filepath.Join(root, n.Name(), "properties"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		target := props["gfx_target_version"]
		if target == 0 {
			continue
		}
		loc := props["location_id"] // bus<<8 | device<<3 | function
		bus := fmt.Sprintf("%04x:%02x:%02x.%x", props["domain"], loc>>8&0xff, loc>>3&0x1f, loc&7)
		out[bus] = gfxName(target)
	}
	return out, nil
}

// gfxName spells a KFD gfx_target_version as a target name: 90010 is
// gfx90a, 90402 gfx942, 110000 gfx1100.
func gfxName(v uint64) string {
	return fmt.Sprintf("gfx%d%x%x", v/10000, v/100%100, v%100)
}

// readProperties reads a KFD properties file: one "name value" pair per
// line, values unsigned decimal.
func readProperties(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(strings.TrimSpace(value), 10, 64); err == nil {
			props[name] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return props, nil
}
