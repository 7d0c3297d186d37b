//go:build rocm

package rocm

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "smi_shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
)

// EnvSMI names the environment variable that picks the system management
// library: "amdsmi" or "rocm-smi". Unset, amdsmi is tried first and
// rocm-smi where amdsmi is absent or fails to start.
const EnvSMI = "INTRANODE_ROCM_SMI"

// Library names as SMI.Library reports them.
const (
	smiAMDSMI  = "amdsmi"
	smiROCmSMI = "rocm-smi"
)

// smiLibrary is one library openSMI can use.
type smiLibrary struct {
	which C.int
	name  string
	// file is the development symlink, sonames are the runtime names of
	// the releases intranode knows (Debian ships only those).
	file    string
	sonames []string
}

var smiLibraries = []smiLibrary{
	{which: C.INS_AMDSMI, name: smiAMDSMI, file: "libamd_smi.so", sonames: []string{"26", "25", "24", "23"}},
	{which: C.INS_RSMI, name: smiROCmSMI, file: "librocm_smi64.so", sonames: []string{"7", "6", "5", "1"}},
}

// candidates lists the names the loader tries for l, in order.
func (l smiLibrary) candidates() []string {
	out := []string{l.file}
	for _, v := range l.sonames {
		out = append(out, l.file+"."+v)
	}
	if root := os.Getenv("ROCM_PATH"); root != "" {
		out = append(out, filepath.Join(root, "lib", l.file))
	}
	return append(out, filepath.Join("/opt/rocm/lib", l.file))
}

// The SMI library is initialised once per process and shut down when the
// last SMI opened on it is closed. Calls are serialised: the C side keeps
// amdsmi's processor handles in a static table.
var smiLib struct {
	mu   sync.Mutex
	refs [2]int
}

// openSMI returns amdsmi, or rocm-smi where amdsmi cannot be used (or as
// EnvSMI says). The error matches backend.ErrUnavailable and says why each
// library could not be used.
func openSMI() (SMI, error) {
	want := os.Getenv(EnvSMI)
	var reasons []string
	for _, l := range smiLibraries {
		if want != "" && want != l.name {
			continue
		}
		s, err := l.open()
		if err == nil {
			return s, nil
		}
		reasons = append(reasons, err.Error())
	}
	if len(reasons) == 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "%s=%q: want %s or %s", EnvSMI, want, smiAMDSMI, smiROCmSMI)
	}
	return nil, backend.Errorf(backend.CodeUnavailable, "no system management library for the link matrix: %s", strings.Join(reasons, "; "))
}

// open loads and initialises l.
func (l smiLibrary) open() (SMI, error) {
	smiLib.mu.Lock()
	defer smiLib.mu.Unlock()
	if smiLib.refs[l.which] > 0 {
		smiLib.refs[l.which]++
		return &cgoSMI{lib: l}, nil
	}
	var notFound, broken []string
	loaded := ""
	for _, name := range l.candidates() {
		path := C.CString(name)
		var msg [gpu.LoaderErrorBufferSize]C.char
		r := C.ins_load(l.which, path, &msg[0], C.size_t(len(msg)))
		C.free(unsafe.Pointer(path))
		if r == 0 {
			loaded = name
			break
		}
		if r == 1 {
			notFound = append(notFound, C.GoString(&msg[0]))
		} else {
			broken = append(broken, fmt.Sprintf("%s: %s", name, C.GoString(&msg[0])))
		}
	}
	switch {
	case loaded == "" && len(broken) > 0:
		return nil, fmt.Errorf("%s: %s", l.name, broken[0])
	case loaded == "":
		return nil, fmt.Errorf("%s: %s not found: %s", l.name, l.file, notFound[0])
	}
	s := &cgoSMI{lib: l, path: loaded}
	if err := s.check("init", C.ins_init(l.which)); err != nil {
		return nil, fmt.Errorf("%s: %w", loaded, err)
	}
	smiLib.refs[l.which] = 1
	return s, nil
}

// cgoSMI is the SMI of a loaded amdsmi or rocm-smi.
type cgoSMI struct {
	lib    smiLibrary
	path   string
	closed bool
}

// entry points by operation, for error messages.
var smiOps = map[string][2]string{
	"init":  {"amdsmi_init", "rsmi_init"},
	"count": {"amdsmi_get_processor_handles", "rsmi_num_monitor_devices"},
	"bdf":   {"amdsmi_get_gpu_bdf_id", "rsmi_dev_pci_id_get"},
	"p2p":   {"amdsmi_is_P2P_accessible", "rsmi_is_P2P_accessible"},
	"link":  {"amdsmi_topo_get_link_type", "rsmi_topo_get_link_type"},
	"close": {"amdsmi_shut_down", "rsmi_shut_down"},
}

func (s *cgoSMI) check(op string, status C.int) error {
	if status == C.INS_SUCCESS {
		return nil
	}
	desc := ""
	if p := C.ins_status_string(s.lib.which, status); p != nil {
		desc = C.GoString(p)
	}
	return &SMIError{Library: s.lib.name, Op: smiOps[op][s.lib.which], Status: int(status), Description: desc}
}

func (s *cgoSMI) Library() string { return s.lib.name }

func (s *cgoSMI) DeviceCount() (int, error) {
	smiLib.mu.Lock()
	defer smiLib.mu.Unlock()
	var n C.uint32_t
	err := s.check("count", C.ins_device_count(s.lib.which, &n))
	return int(n), err
}

func (s *cgoSMI) BusID(i int) (string, error) {
	smiLib.mu.Lock()
	defer smiLib.mu.Unlock()
	var id C.uint64_t
	if err := s.check("bdf", C.ins_bdf(s.lib.which, C.uint32_t(i), &id)); err != nil {
		return "", err
	}
	return bdfString(uint64(id)), nil
}

func (s *cgoSMI) P2PAccessible(i, j int) (bool, error) {
	smiLib.mu.Lock()
	defer smiLib.mu.Unlock()
	var ok C.int
	err := s.check("p2p", C.ins_p2p(s.lib.which, C.uint32_t(i), C.uint32_t(j), &ok))
	return ok != 0, err
}

func (s *cgoSMI) Link(i, j int) (uint64, LinkType, error) {
	smiLib.mu.Lock()
	defer smiLib.mu.Unlock()
	var hops C.uint64_t
	var t C.int
	err := s.check("link", C.ins_link_type(s.lib.which, C.uint32_t(i), C.uint32_t(j), &hops, &t))
	return uint64(hops), LinkType(t), err
}

// Close releases this SMI; the last one shuts the library down.
func (s *cgoSMI) Close() error {
	smiLib.mu.Lock()
	defer smiLib.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	smiLib.refs[s.lib.which]--
	if smiLib.refs[s.lib.which] > 0 {
		return nil
	}
	return s.check("close", C.ins_shutdown(s.lib.which))
}

var (
	_ SMI   = (*cgoSMI)(nil)
	_ error = (*SMIError)(nil)
)
