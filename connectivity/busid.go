package connectivity

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformedBusID is what NormalizeBusID returns (wrapped) for an id it
// cannot read.
var ErrMalformedBusID = errors.New("malformed PCI bus id")

// NormalizeBusID returns a PCI bus id in one canonical form,
// "dddd:bb:dd.f" in lower-case hex, so that the spellings of drivers and
// management libraries compare equal (NVML's "00000000:19:00.0", CUDA's
// "0000:19:00.0", HIP's "0000:C1:00.0", SMI's BDFIDs, KFD's location ids).
// A missing domain is domain 0 and a missing function is function 0.
func NormalizeBusID(id string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(strings.TrimRight(id, "\x00")))
	parts := strings.Split(s, ":")
	var domain, bus, devfn string
	switch len(parts) {
	case 3:
		domain, bus, devfn = parts[0], parts[1], parts[2]
	case 2:
		domain, bus, devfn = "0", parts[0], parts[1]
	default:
		return "", fmt.Errorf("%w %q", ErrMalformedBusID, id)
	}
	dev, fn, hasFn := strings.Cut(devfn, ".")
	if !hasFn {
		fn = "0"
	}
	d, err1 := strconv.ParseUint(domain, 16, 32)
	b, err2 := strconv.ParseUint(bus, 16, 8)
	v, err3 := strconv.ParseUint(dev, 16, 8)
	f, err4 := strconv.ParseUint(fn, 16, 8)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || v > 0x1f || f > 7 {
		return "", fmt.Errorf("%w %q", ErrMalformedBusID, id)
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, v, f), nil
}
