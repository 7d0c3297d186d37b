package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/intranode/intranode/backend"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); the
// module version or the VCS revision from the build info is used otherwise.
var version = ""

func runVersion(ctx context.Context, args []string, s streams) error {
	fs := newFlags("version", s)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "intranode %s (%s, %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(s.Out, "backends: %s\n", strings.Join(backend.Drivers(), ", "))
	return nil
}

func versionString() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, st := range info.Settings {
		if st.Key == "vcs.revision" && len(st.Value) >= 12 {
			return "devel-" + st.Value[:12]
		}
	}
	return "devel"
}
