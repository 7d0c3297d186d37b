package fake_test

import (
	"os"
	"testing"

	"github.com/intranode/intranode/internal/launch"
)

// TestMain keeps the helper processes this package starts from sleeping a
// second at exit in race builds.
func TestMain(m *testing.M) {
	launch.QuietRaceExit()
	os.Exit(m.Run())
}
