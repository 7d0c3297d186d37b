package cpu

import (
	"os"
	"testing"

	"github.com/intranode/intranode/internal/race"
)

func TestMain(m *testing.M) {
	race.ShareCores()
	os.Exit(m.Run())
}
