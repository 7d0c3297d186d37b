//go:build !linux

package plugin

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/intranode/intranode/backend"
)

// Name is the registry name of the plugin driver.
const Name = "plugin"

// Plugins pass descriptors with SCM_RIGHTS on a SOCK_SEQPACKET socketpair
// and map shared memory, as only the Linux build does. Elsewhere the driver
// is registered so that "plugin:PATH" says why it cannot work.
func init() {
	backend.Register(backend.Driver{Name: Name, Priority: 0, Open: func(context.Context, string) (backend.Backend, error) {
		return nil, unavailable()
	}})
}

func unavailable() error {
	return backend.Errorf(backend.CodeUnavailable, "plugin: backend plugins need Linux, this is %s", runtime.GOOS)
}

// Serve reports that plugins need Linux and exits with status 1.
func Serve(backend.Backend) {
	fmt.Fprintln(os.Stderr, unavailable())
	os.Exit(1)
}
