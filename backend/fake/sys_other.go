//go:build !linux

package fake

import (
	"os"
	"runtime"

	"github.com/intranode/intranode/backend"
)

// The fake needs memfd_create and /proc, which only Linux has. Elsewhere
// the package builds, Probe and New report why it cannot be used, and the
// primitives below are never reached.

func unavailable() error {
	return backend.Errorf(backend.CodeUnavailable, "fake: needs Linux (memfd_create), this is %s", runtime.GOOS)
}

func probeMemfd() error { return unavailable() }

func mapAnon(int, bool) ([]byte, error) { return nil, unavailable() }

func newMemfd(int) (*os.File, []byte, error) { return nil, nil, unavailable() }

type fileStat struct {
	dev, ino uint64
	size     int64
}

func statFile(*os.File) (fileStat, error) { return fileStat{}, unavailable() }

func mapFile(*os.File, int) ([]byte, error) { return nil, unavailable() }

func dupFile(*os.File) (*os.File, error) { return nil, unavailable() }

func fdNumber(*os.File) (int, error) { return 0, unavailable() }

func openProcFD(int, int) (*os.File, error) { return nil, unavailable() }

func unmap([]byte) error { return unavailable() }
