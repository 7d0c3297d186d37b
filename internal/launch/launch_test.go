package launch_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/symmetric/store"
)

// envMode tells a launched copy of the test binary what to do as a rank.
const envMode = "INTRANODE_LAUNCH_TEST_MODE"

func TestMain(m *testing.M) {
	if r, ok := launch.Rank(); ok {
		os.Exit(child(r, os.Getenv(envMode)))
	}
	os.Exit(m.Run())
}

// child is one rank: "lines" prints three lines and exits 0; "procs"
// prints its GOMAXPROCS; "fail1"
// makes rank 1 exit 3 at once and the others wait; "hang" waits; "store"
// sets its rank's key in the served store and reads rank 0's.
func child(r int, mode string) int {
	switch mode {
	case "lines":
		for i := range 3 {
			fmt.Printf("rank %d line %d\n", r, i)
		}
		fmt.Fprintln(os.Stderr, "to stderr")
		return 0
	case "procs":
		fmt.Printf("GOMAXPROCS %d\n", runtime.GOMAXPROCS(0))
		return 0
	case "fail1":
		if r == 1 {
			fmt.Fprintln(os.Stderr, "rank 1 gives up")
			return 3
		}
	case "store":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := store.DialTCP(ctx, os.Getenv("ADDR"), store.WithTimeout(10*time.Second))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer st.Close()
		if err := st.Set(ctx, "k/"+strconv.Itoa(r), []byte(strconv.Itoa(r))); err != nil {
			fmt.Println(err)
			return 1
		}
		v, err := st.Get(ctx, "k/0")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("got %s\n", v)
		return 0
	}
	time.Sleep(time.Minute)
	return 0
}

func modeEnv(mode string) func(int, string) []string {
	return func(_ int, addr string) []string { return []string{envMode + "=" + mode, "ADDR=" + addr} }
}

func TestLinesByRank(t *testing.T) {
	got := map[int][]string{}
	res, err := launch.Run(t.Context(), launch.Config{World: 3, Env: modeEnv("lines"), Deadline: 30 * time.Second,
		Lines: func(r int, line []byte) { got[r] = append(got[r], string(line)) }})
	require.NoError(t, err)
	require.Len(t, res, 3)
	for r, x := range res {
		require.Equal(t, r, x.Rank)
		require.NoError(t, x.Err)
		require.Equal(t, "to stderr\n", x.Output, "standard error is captured apart")
		require.Equal(t, []string{fmt.Sprintf("rank %d line 0", r), fmt.Sprintf("rank %d line 1", r), fmt.Sprintf("rank %d line 2", r)}, got[r])
	}
}

// TestRanksShareTheCores: each rank's Go scheduler gets its share of the
// cores, or what GOMAXPROCS in the environment says.
func TestRanksShareTheCores(t *testing.T) {
	for _, world := range []int{1, 2, 3} {
		want := strconv.Itoa(max(1, runtime.NumCPU()/world))
		if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
			want = v
		}
		got := make([][]string, world)
		res, err := launch.Run(t.Context(), launch.Config{World: world, Env: modeEnv("procs"), Deadline: 30 * time.Second,
			Lines: func(r int, line []byte) { got[r] = append(got[r], string(line)) }})
		require.NoError(t, err)
		for r, x := range res {
			require.NoError(t, x.Err)
			require.Equal(t, []string{"GOMAXPROCS " + want}, got[r], "world %d, rank %d", world, r)
		}
	}
}

func TestFailFastEndsTheGroup(t *testing.T) {
	res, err := launch.Run(t.Context(), launch.Config{World: 3, Env: modeEnv("fail1"), Deadline: time.Minute, FailFast: true})
	require.NoError(t, err)
	require.ErrorContains(t, res[1].Err, "exit status 3")
	require.Contains(t, res[1].Output, "rank 1 gives up")
	for _, r := range []int{0, 2} {
		require.Error(t, res[r].Err)
		require.False(t, res[r].Killed, "ended by the group, not by a fault")
		require.False(t, res[r].TimedOut, "the waiting ranks ran until the deadline")
	}
}

func TestDeadlineKillsEveryone(t *testing.T) {
	res, err := launch.Run(t.Context(), launch.Config{World: 2, Env: modeEnv("hang"), Deadline: 500 * time.Millisecond})
	require.NoError(t, err)
	for _, x := range res {
		require.Error(t, x.Err)
		require.True(t, x.TimedOut)
		require.False(t, x.Killed)
		// SIGQUIT first: the Go runtime says where the child hung.
		require.Contains(t, x.Output, "SIGQUIT", x.Output)
		require.Contains(t, x.Output, "launch_test.child(", x.Output)
	}
}

// TestSignalIsAFault: a rank the caller kills is reported killed, and the
// others run on until the deadline (1 s: TestDeadlineKillsEveryone shows
// hanging ranks reached in half that).
func TestSignalIsAFault(t *testing.T) {
	g, err := launch.Start(t.Context(), launch.Config{World: 2, Env: modeEnv("hang"), Deadline: time.Second})
	require.NoError(t, err)
	require.NoError(t, g.Signal(1, syscall.SIGKILL))
	require.Error(t, g.Signal(2, syscall.SIGKILL))
	res := g.Wait()
	require.True(t, res[1].Killed)
	require.True(t, res[0].TimedOut)
}

func TestServedStore(t *testing.T) {
	res, err := launch.Run(t.Context(), launch.Config{World: 3, Env: modeEnv("store"), Deadline: 30 * time.Second,
		ServeStore: true, StoreOptions: []store.Option{store.WithTimeout(10 * time.Second)}})
	require.NoError(t, err)
	for _, x := range res {
		require.NoError(t, x.Err, x.Output)
		require.Equal(t, "got 0", strings.TrimSpace(x.Output))
	}
}

func TestBadWorld(t *testing.T) {
	_, err := launch.Run(context.Background(), launch.Config{World: 0})
	require.Error(t, err)
}

// TestHungStacks: a hung rank's dump condensed to the goroutines in this
// module's code.
func TestHungStacks(t *testing.T) {
	const dump = `SIGQUIT: quit
PC=0x4711 m=0 sigcode=0

goroutine 1 gp=0xc000002380 m=nil [syscall, 2 minutes]:
runtime.cgocall(0x9b2a40, 0xc0001a5c30)
	/usr/local/go/src/runtime/cgocall.go:167 +0x4b
github.com/intranode/intranode/backend/cuda._Cfunc_inu_nccl_abort(0x1, 0x2)
	_cgo_gotypes.go:512 +0x47
github.com/intranode/intranode/backend/cuda.(*ncclComm).release.func1()
	/src/backend/cuda/nccl.go:426 +0x35
created by github.com/intranode/intranode/backend/cuda.(*ncclComm).release in goroutine 7
	/src/backend/cuda/nccl.go:424 +0x9e

goroutine 5 gp=0xc000003340 m=nil [chan receive]:
os/signal.loop()
	/usr/local/go/src/os/signal/signal_unix.go:23 +0x13
`
	for _, tc := range []struct {
		name, output, want string
	}{
		{"a rank in a C call", dump, "stacks: 1 gp=0xc000002380 m=nil [syscall, 2 minutes]: runtime.cgocall < " +
			"backend/cuda._Cfunc_inu_nccl_abort < backend/cuda.(*ncclComm).release.func1"},
		{"no Go dump", "killed\n", "no stack of this module's code in its output"},
		{"only the runtime's goroutines", "goroutine 5 [chan receive]:\nos/signal.loop()\n\t/x.go:1\n",
			"no stack of this module's code in its output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, launch.HungStacks(tc.output))
		})
	}
}
