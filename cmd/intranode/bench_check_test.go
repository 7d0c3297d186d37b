package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/kernels/cpu"
)

// faultyDriver is the fake backend with one kernel broken, for the tests
// of the bench's check: "fake-faulty:MODE=KERNEL", MODE "drop" (the kernel
// runs, then its output is put back as it was: it wrote nothing) or "flip"
// (one element of its output is changed afterwards).
const faultyDriver = "fake-faulty"

func init() {
	backend.Register(backend.Driver{Name: faultyDriver, Priority: -1, Open: openFaulty})
}

func openFaulty(_ context.Context, arg string) (backend.Backend, error) {
	mode, name, _ := strings.Cut(arg, "=")
	real, ok := cpu.Kernels()[name]
	if !ok || mode != "drop" && mode != "flip" {
		return nil, fmt.Errorf("%s: want MODE=KERNEL with MODE drop or flip and a kernel of kernels/cpu, got %q", faultyDriver, arg)
	}
	broken := func(ctx context.Context, l *fake.Launch) error {
		a, err := kernels.ParseAllReduceArgs(l.Args)
		if err != nil {
			return err
		}
		n := int(a.Count) * a.DType.Size()
		if strings.Contains(name, "all_gather") {
			n *= int(a.World)
		}
		out, err := l.Mem.Bytes(a.Output, n)
		if err != nil {
			return err
		}
		before := append([]byte(nil), out...)
		if err := real(ctx, l.Mem, l.Config, l.Args); err != nil {
			return err
		}
		if mode == "drop" {
			copy(out, before)
		} else {
			out[n/2/a.DType.Size()*a.DType.Size()] ^= 1
		}
		return nil
	}
	return fake.New(fake.WithDevices(8), fake.WithKernels(kernels.ModuleName, map[string]fake.Kernel{name: broken}))
}

// TestBenchCheckCatchesBrokenKernels: every row of the bench is checked on
// its own output. A two-shot that writes nothing, measured right after a
// correct one-shot of the same sizes (whose result it used to inherit, so
// that it passed), and kernels that get one element wrong are reported in
// #wrong, and the bench exits non-zero; the correct rows stay at 0.
func TestBenchCheckCatchesBrokenKernels(t *testing.T) {
	t.Parallel()
	bf16 := func(a kernels.Algo) string { return kernels.KernelName(a, backend.BFloat16) }
	for _, tc := range []struct {
		name   string
		broken string // MODE=KERNEL
		args   []string
		bad    string // the algo whose rows must be wrong
		exact  int    // wrong elements per bad row, when known (one per rank)
	}{
		{"two-shot writes nothing after one-shot", "drop=" + bf16(kernels.TwoShot),
			[]string{"--algo", "oneshot,twoshot", "--inplace"}, "twoshot", 0},
		{"two-shot one element wrong", "flip=" + bf16(kernels.TwoShot),
			[]string{"--algo", "oneshot,twoshot", "--inplace"}, "twoshot", 2},
		{"all-gather writes nothing", "drop=" + bf16(kernels.AllGather),
			[]string{"--op", "all_gather", "--algo", "direct", "--inplace"}, "direct", 0},
		{"all-gather one element wrong", "flip=" + bf16(kernels.AllGather),
			[]string{"--op", "all_gather", "--algo", "direct"}, "direct", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"bench", "--backend", faultyDriver + ":" + tc.broken, "--procs=false",
				"-b", "1K", "-e", "64K", "-f", "4", "--iters", "2", "--warmup", "1", "--json"}, tc.args...)
			out, stderr, code := runCLI(t, args...)
			require.NotEqual(t, 0, code, "the bench must fail on wrong results; stderr: %s", stderr)
			require.Contains(t, stderr, "wrong elements")
			var rows []benchRow
			require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
			bad := 0
			for _, r := range rows {
				if r.Algo != tc.bad {
					require.Zero(t, r.Wrong, "row %+v", r)
					continue
				}
				bad++
				require.Positive(t, r.Wrong, "row %+v", r)
				if tc.exact > 0 {
					require.Equal(t, tc.exact, r.Wrong, "row %+v", r)
				}
			}
			require.Positive(t, bad)
		})
	}
}

// TestBenchAverage: --redop avg at worlds 2 and 3 checks every all-reduce
// and reduce-scatter row against the exact quotient (0 wrong with the
// kernels), and a division kernel that writes nothing makes every row
// wrong and the bench fail.
func TestBenchAverage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		world  string
		broken bool
	}{{"2", false}, {"3", false}, {"3", true}} {
		t.Run(fmt.Sprintf("world %s broken %v", tc.world, tc.broken), func(t *testing.T) {
			t.Parallel()
			be := "fake"
			if tc.broken {
				be = faultyDriver + ":drop=" + kernels.KernelName(kernels.Divide, backend.BFloat16)
			}
			out, stderr, code := runCLI(t, "bench", "--backend", be, "--procs=false", "--world", tc.world,
				"--redop", "avg", "-b", "1K", "-e", "64K", "-f", "8", "--iters", "2", "--warmup", "1", "--json",
				"--op", "all_reduce,reduce_scatter", "--algo", "auto,oneshot,twoshot,direct")
			var rows []benchRow
			require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
			ran := 0
			for _, r := range rows {
				if r.Skipped != "" {
					continue
				}
				ran++
				require.Equal(t, "avg", r.Op, "row %+v", r)
				if tc.broken {
					require.Positive(t, r.Wrong, "row %+v", r)
				} else {
					require.Zero(t, r.Wrong, "row %+v", r)
				}
			}
			require.GreaterOrEqual(t, ran, 8, out)
			if tc.broken {
				require.NotEqual(t, 0, code)
				require.Contains(t, stderr, "wrong elements")
			} else {
				require.Equal(t, 0, code, stderr)
			}
		})
	}
}

// TestBenchSingle: --single times one call at a time, eagerly and one call
// per graph launch; every row is checked and the header says which mode.
func TestBenchSingle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		mode string
	}{
		{[]string{"--single"}, "eager launches, each waited for"},
		{[]string{"--single", "--graph"}, "one call per graph launch, each waited for"},
		{nil, "eager launches, chained"},
	} {
		args := append([]string{"bench", "--backend", "fake", "--procs=false", "-b", "1K", "-e", "16K", "--iters", "4",
			"--warmup", "1", "--algo", "auto,oneshot", "--op", "all_reduce,all_gather"}, tc.args...)
		out, stderr, code := runCLI(t, args...)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, tc.mode)
		require.Contains(t, out, "# Out of bounds values : 0 OK")
	}
}

// TestSoakNamesWrongCalls: a kernel that gets one element wrong fails the
// soak, whose report names each wrong call (collective, count, dtype,
// path, how long it took) and its first wrong element.
func TestSoakNamesWrongCalls(t *testing.T) {
	t.Parallel()
	broken := faultyDriver + ":flip=" + kernels.KernelName(kernels.AllGather, backend.Float32)
	out, stderr, code := runCLI(t, "soak", "--backend", broken, "--world", "2", "--duration", "3s", "--job", "3s",
		"--timeout", "2s", "--max", "64K", "--seed", "7")
	require.NotEqual(t, 0, code, "the soak must fail on wrong results: %s", out)
	require.Regexp(t, `rank [01]: [1-9][0-9]* wrong results: call [0-9]+ \(all_gather [0-9]+×float [a-z]+, [a-z]+, in place (true|false), ended [0-9.]+[µm]?s after it began\): [1-9][0-9]* of [0-9]+ elements wrong, the first element [0-9]+: got`, out+stderr)
}
