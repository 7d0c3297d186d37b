//go:build linux

package plugin_test

import (
	"os"
	"testing"

	"github.com/intranode/intranode/conformance"
	_ "github.com/intranode/intranode/kernels/cpu"
)

func TestMain(m *testing.M) {
	conformance.MaybeChild()
	os.Exit(m.Run())
}
