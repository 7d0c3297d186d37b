package race_test

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/internal/race"
)

// TestReportedWriteRaces checks that a write reported through Write is
// seen by the detector: two goroutines report writes to the same slice
// without synchronisation, in a child process (a detected race fails the
// process that has it), which must then report a data race.
func TestReportedWriteRaces(t *testing.T) {
	if !race.Enabled {
		t.Skip("needs -race")
	}
	if os.Getenv("INTRANODE_RACE_CHILD") == "1" {
		s := make([]uint64, 4)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { race.Write(s) })
		}
		wg.Wait()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReportedWriteRaces$")
	cmd.Env = append(os.Environ(), "INTRANODE_RACE_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the child's unsynchronised writes went unreported:\n%s", out)
	require.True(t, strings.Contains(string(out), "WARNING: DATA RACE"), "child output:\n%s", out)
}

// TestReportedReadsAfterSync checks the other side: reads reported after
// a synchronising channel receive are not a race.
func TestReportedReadsAfterSync(t *testing.T) {
	s := make([]uint16, 8)
	done := make(chan struct{})
	go func() {
		race.Write(s)
		close(done)
	}()
	<-done
	race.Read(s)
	require.Len(t, s, 8)
}
