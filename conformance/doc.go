// Package conformance is the suite every intranode backend must pass: the
// same cases for the fake, CUDA, ROCm and plugin backends, runnable from
// `go test` (RunTests) and from the CLI (`intranode conformance`, Run).
//
// Cases cover connectivity invariants, every rendezvous outcome (success
// and each refusal), symmetric memory reads, writes, signals and barriers,
// and all-reduce checked exactly for every algorithm × dtype × size ×
// in-place/out-of-place, with canaries around every buffer a kernel
// touches. Ranks run as goroutines or as separate processes (the running
// binary re-executed; its TestMain or main must call MaybeChild first).
//
// The faults group (Config.Faults, `intranode conformance --faults
// --trials N`) is opt-in: each case is run Trials times and judged trial
// by trial. A rank is SIGKILLed during rendezvous, a barrier or an
// all-reduce (by itself at a chosen point, or by the harness at a random
// moment), or stalls; every other rank must fail within its deadline plus
// FaultGrace, naming a stalled rank, and Close within FaultCloseLimit.
// Hostile outsiders — garbage and wrong secrets on the TCP store, a
// descriptor from a process outside the group, a squatter on a rank's IPC
// socket name — must be refused without disturbing the group. Cases that
// kill or spawn processes need Processes mode.
//
// A backend's whole test is a few lines:
//
//	func TestMain(m *testing.M) { conformance.MaybeChild(); os.Exit(m.Run()) }
//
//	func TestConformance(t *testing.T) {
//		conformance.RunTests(t, conformance.Config{Backend: "fake", Worlds: []int{2, 4, 8}})
//	}
package conformance
