// Package kernels defines the kernel ABI shared by every backend: the names
// of the built-in kernels, their argument lists, the layout of the signal pad
// and the status word, and the exact algorithm each kernel must carry out.
// The CUDA and HIP sources in kernels/cuda and kernels/hip and the fake
// backend's Go kernels (package kernels/cpu) all implement this one
// document, so that package collective can drive any backend the same way.
//
// # Signal pad
//
// Every rank owns one signal pad of SignalPadSize bytes, zeroed before first
// use and never reset afterwards: flags only grow, so back-to-back calls and
// graph replays never see stale values. The pad holds uint32 words:
//
//	inbox[ch][src] at InboxOffset + (ch*MaxRanks+src)*4   written by rank src
//	sent[ch][dst]  at SentOffset  + (ch*MaxRanks+dst)*4   local: signals sent to dst
//	recv[ch][src]  at RecvOffset  + (ch*MaxRanks+src)*4   local: signals consumed from src
//	state          at StateOffset, StateSize bytes         per-rank P2P state:
//	  epoch        at EpochWord                            local: one-shot LL and push and Pipeline calls so far
//	  ticket       at TicketWord                           local: device kernels' scratch, 0 between calls
//	  record       at RecordOffset (RecordSize bytes)      local: this rank's latest call (Record)
//	  callIn[src][p] at CallInWord(src, p) (uint64)        written by rank src: its Call, p = seq mod 2
//	  probe        at ProbeOffset, ProbeSize bytes         local: read by peers at rendezvous
//	LL area        at LLOffset, LLSize bytes               written by peers (one-shot LL)
//	push area      at PushOffset, PushSize bytes           written by peers (one-shot push)
//
// PutSignal(dst, ch): s = sent[ch][dst]+1; sent[ch][dst] = s; then, with
// release semantics (all prior writes of this block visible system-wide
// first), store s into inbox[ch][me] of dst's pad.
//
// WaitSignal(src, ch): want = recv[ch][src]+1; spin with acquire loads until
// int32(inbox[ch][src] - want) >= 0 (wrap-safe); then recv[ch][src] = want.
// Signals count, so two puts may precede two waits.
//
// Barrier(ch, mask): for every rank p != me with bit p of mask set,
// PutSignal(p, ch); then for each such p, WaitSignal(p, ch).
//
// # Deadlines and status
//
// Every spin has a deadline: timeoutNs nanoseconds after the kernel began
// waiting (device clock: %globaltimer on CUDA, wall clock on the fake). On
// expiry the kernel stores EncodeStatus(StatusTimeout, peer, ch) into the
// status word (a uint32 in host-mapped memory) with compare-and-swap from 0,
// so the first failure wins, and returns without trapping. The host reads
// and clears the status word after synchronising.
//
// # Early launch
//
// The all-reduce kernels may be launched early (backend.LaunchConfig.Early:
// programmatic dependent launch on CUDA): they may start while the work
// ahead of them on the stream still runs. Until that work has finished they
// read only their parameters and the pointer tables (Bufs, Pads, written
// by the host before any of the stream's work) and write nothing; the
// signal kernels are never launched early.
//
// # Call agreement
//
// Ranks must make the same all-reduce calls in the same order. Every
// all-reduce launch carries Call = CallTag(seq, algo, count, dtype, op):
// the comm's call number in bits 32–63 and a fingerprint of the rest in
// bits 0–31 (never 0). A Call of 0 turns the checks below off (tests and
// tools that drive kernels directly).
//
//  1. At the start the kernel writes Record{Call, Count, Info} to its own
//     pad (RecordOffset), and stores Call into callIn[me][seq mod 2] of
//     every peer's pad, before its first PutSignal to that peer (so the
//     signal's release publishes it) or, on the LL path, at once.
//  2. After a WaitSignal(p) of its first barrier, a kernel compares
//     callIn[p][seq mod 2] of its own pad with its Call. A peer's later
//     call writes the other parity, and it cannot get two calls ahead
//     while this rank waits, so any other value means the calls differ.
//  3. While it spins for rank p in a barrier, a kernel also watches
//     callIn[p][seq mod 2]: a value with its own call number but another
//     fingerprint means the calls differ (a rank on another path, say
//     two-shot against one-shot LL, finds out this way); and, now and
//     then, the status word: once it is not 0, some thread of the launch
//     has given up and the spin ends. The LL path's spins watch only the
//     status word (the device kernels have no registers to spare there),
//     so an LL rank facing a peer on another path waits for its deadline
//     and the host tells the difference from the records.
//  4. The LL flag (LLFlag) carries the epoch in bits 24–31 and 23 bits
//     of the Call's hash in bits 1–23 (bit 0 is 1): a complete line with
//     this epoch but another flag is a differing call.
//
// A kernel that finds a difference with rank p stores
// EncodeStatus(StatusMismatch, p, ch) and returns without writing its
// output. The host then reads every
// rank's record to name the ranks whose calls differ; after a timeout it
// does the same, since a rank whose record is a call ahead of, or the same
// call as but different from, this rank's was not late but elsewhere.
// A comm whose kernel failed is not used again: counters and epochs no
// longer agree between ranks.
//
// # All-reduce
//
// The three all-reduce kernels take AllReduceArgs. Each rank's symmetric
// buffer is bufs[r] (device array of World pointers, as mapped in this
// process); signal pads are pads[r]. Reduction is in ascending rank order
// (acc = x0; acc = op(acc, x1); …) so every rank gets identical bits;
// float16 and bfloat16 accumulate in float32 and round to nearest even once
// at the end; float32 accumulates in float32, float64 in float64, int32 with
// two's-complement wrap-around.
//
// Multi-block kernels synchronise block b only with block b of the other
// ranks (channel b), so a block may only read what same-index blocks wrote.
// Kernels use channels [0, KernelChannels); the comm's host barrier uses
// KernelChannels, ConfirmKernel ConfirmChannel, the peer-access probe
// ProbeChannel.
//
// OneShot (count*size <= buffer) takes one of three paths, chosen from
// the message size and the world alone (OneShotPath), so that every rank
// takes the same one. The LL and push paths use no symmetric buffer and no
// closing barrier: they alternate between two slots of areas in the
// peers' pads, picked by the epoch.
//
// Epoch: E = the epoch word of my pad, s = E mod 2. An LL or push call
// reads E and leaves E+1 there (every block of a launch reads E before it
// changes). A rank writes into slot s of a peer's area only in a call of
// epoch E, and its previous write there was in a call of epoch at most
// E-2; between them lies its call E-1, which it finished only after every
// peer had started call E-1 (the LL path waits for every peer's lines, the
// push path for every peer's signal), and so had finished call E-2 (calls
// on a stream run in order). So no rank overwrites data that a peer has
// not consumed. Every rank must make the same sequence of LL and push
// calls on a pad (they do: same calls, same sizes, same paths).
//
// The LL path, when 0 < count*size <= OneShotLLMax(World). Data travels
// in "LL lines": 16 bytes {d0, f, d1, f} (uint32 words) carrying 8 payload
// bytes d0 d1 and the flag f twice; each 8-byte half {d, f} is written as
// one unit, so a reader that sees f in both halves has the whole line. The
// payload is the input padded with zeros to a multiple of 16 bytes; line j
// carries its bytes [8j, 8j+8).
//  1. f = LLFlag(E, Call) (odd, so never 0, the pad's initial value);
//  2. for every peer p != me, write line j, for every j, at
//     LLLine(World, s, me, p, j) of p's pad;
//  3. for every peer q, wait (with the deadline) until line j at
//     LLLine(World, s, q, me, j) of my own pad carries f in both halves;
//     output[i] = reduce over r of (r == me ? input : q's payload)[i];
//     then set every line read to zero;
//  4. epoch = E+1.
//
// Lines are cleared once read, so every line in a slot is zero or of the
// call in progress: the flag's epoch byte repeats every 256 calls, and a
// line left by call E-256 at a position no call since has written would
// otherwise pass for a differing call of epoch E (or, should its 23-bit
// hash match, for data). The clearing stores precede the launch's end, and
// the next write into the slot (call E+2 of the sender) follows this rank's
// lines of call E+1, so they cannot overtake it.
//
// The push path, when OneShotLLMax(World) < count*size <=
// OneShotPushMax(World), in one round, or two when count*size >
// PushSplitBytes. The data is the input padded with zeros to a multiple of
// 16 bytes; with two rounds each rank cuts it into two parts at a 16-byte
// boundary (the device kernels cut each block's share of the vectors in
// half: every rank cuts the same way).
//  1. for every peer p != me, write (the first part of) the data at its
//     offset from PushData(World, s, me, p) of p's pad;
//  2. Barrier(all);
//  3. two rounds only: write the second part likewise; reduce the first
//     part (as in 4); Barrier(all);
//  4. output[i] = reduce over r of (r == me ? input : the data at
//     PushData(World, s, r, me) of my own pad)[i], for the part not yet
//     reduced;
//  5. epoch = E+1.
//
// The Go kernels (kernels/cpu) move rank a's data for rank b through the
// mirror region, PushData(World, s, b, a) of a's own pad, in the calls
// whose E has bit 1 set (the sender writes its own pad, the receiver
// reads it there), here and on the data-movement push path: on a CPU a
// line costs least to write when the other rank wrote it last. Over
// PushSplitBytes (per block) they also barrier before their writes and
// after their reads, and use slot 0 in every call, the mirror region
// when E is odd. The device kernels always write into the receiver's pad.
// Every rank of a job runs the same kernels, so all agree.
//
// The classic path, for every other count (0 included):
//  1. copy input to bufs[me][0:n) unless input == bufs[me];
//  2. Barrier(all);
//  3. output[i] = reduce over r of bufs[r][i];
//  4. Barrier(all), so no rank overwrites its buffer while a peer reads it.
//
// TwoShot (count*size <= buffer): slices split count into World pieces of
// SliceElems(count, world, size) elements (16-byte aligned boundaries; the
// last slices may be short or empty).
//  1. copy input to bufs[me] as above; 2. Barrier(all);
//  3. red = reduce over r of bufs[r][slice me] (my own part may be read
//     from the input instead); output[slice me] = red, and
//     bufs[p][slice me] = red for every p != me (each element is read and
//     then written by the same thread, so a peer's copy of its input is
//     consumed before the result replaces it);
//  4. Barrier(all);
//  5. output[slice p] = bufs[me][slice p] for every p != me.
//
// No barrier closes the two-shot: after step 4 no rank touches another
// rank's buffer, and the next call's first write to a peer's buffer (its
// step 3) comes after that call's step-2 barrier, which the peer reaches
// only once it has finished step 5. So when a call returns on a rank, its
// buffer is its own again, as after every other algorithm.
//
// Pipeline (any count; no symmetric buffer): the push path in chunks, for
// messages larger than the push area. It reads E and leaves E+1 like the
// LL and push paths. A launch of G blocks cuts each sender's region of a
// slot (OneShotPushMax(World) bytes at PushData(World, s, src, dst)) into G
// block regions of B = (OneShotPushMax(World)/G) &^ 15 bytes. Up to
// PipelineWideBytes, each block region of half s holds two chunk slots of
// C = (B/2) &^ 15 bytes; over it ("wide"), slot 0 is the block's region of
// half s and slot 1 the same region of the other half, C = B.
// PipelineChunk and PipelineSlot give both forms; kernels given a grid
// that leaves C < 16 report StatusBadArgs. The data, the input padded with
// zeros to a multiple of 16 bytes, is cut into chunks of C bytes; block b
// (channel b) moves chunks c_j = b + j*G, j = 0, 1, …, S-1 (S is the
// number of chunks with index b mod G, 0 when there are none), chunk c_j in
// slot j mod 2 at PipelineSlot(n, World, s, src, dst, b, G, j mod 2) of
// the receiver's pad. "Write j" stores chunk c_j into that slot of every
// peer's pad; "signal" is PutSignal(p, b) to every peer p (the first
// carries the call agreement: Call published before it).
//  1. if S > 0: write 0, signal;
//  2. for j < S: WaitSignal(p, b) for every peer p (the first is followed by
//     the agreement check); write j+1 if j+1 < S; output[chunk c_j] =
//     reduce over r of (r == me ? input : the chunk in the slot of r's at my
//     own pad); then, if j+1 < S, signal;
//  3. wide only, when S is even (the last chunk lies in the other half):
//     signal, then WaitSignal(p, b) for every peer p.
//
// Write j+1 rewrites slot (j+1) mod 2, which held chunk c_(j-1), after the
// peer's signal for chunk c_j, which the peer sends only once it has
// reduced chunk c_(j-1): the signal also frees the slot. Chunk c_0 goes to
// half s, which the epoch argument above frees; in a wide call every later
// write follows a signal of this call from the peer, which has therefore
// finished the previous call; and step 3 keeps the next call's push path,
// which writes half s+1 without a signal, from overwriting a last chunk
// the peer has not reduced. A rank reads input chunk c_j (write j) a step
// before it writes output chunk c_j, so input and output may be the same
// memory. Every rank must launch the same grid (the host computes it from
// the size alone); a kernel run on one host thread (the fake) is a grid of
// one.
//
// Pipeline, scattered (World >= 3, PipelineScatters): the steps above move
// every chunk to every peer, World-1 times what a reduce-scatter and an
// all-gather must move; from three ranks on the Pipeline runs as a chunked
// reduce-scatter + all-gather instead, 2(World-1)/World of the message
// per rank. Each block region of half s (B bytes, as above) holds four
// slots of Q = PipelineSlice(World, G) = (B/4) &^ 15 bytes at
// PipelineScatterSlot(World, s, src, dst, b, G, k): k = 0, 1 the
// reduce-scatter slots, k = 2, 3 the all-gather slots. A chunk is
// C = World*Q bytes (PipelineChunk), cut into World slices of Q bytes:
// slice r of a chunk belongs to rank r. Chunks c_j = b + j*G as above.
// "Scatter j" stores slice p of chunk c_j (zero-padded to 16 bytes; an
// empty slice stores nothing) into RS slot j mod 2 of peer p's pad, for
// every peer p. "Reduce j" sets output[slice me of c_j] = reduce over r of
// (r == me ? input : slice me of c_j in r's RS slot j mod 2 of my pad) and
// stores the result into AG slot j mod 2 of every peer's pad. "Gather j"
// copies slice p of c_j from p's AG slot j mod 2 of my pad into the
// output, for every peer p.
//  1. if S > 0: scatter 0, signal;
//  2. for j < S: WaitSignal(p, b) for every peer p (the first is followed by
//     the agreement check); gather j-1 if j > 0; scatter j+1 if j+1 < S;
//     reduce j; signal;
//  3. if S > 0: WaitSignal(p, b) for every peer p; gather S-1.
//
// Scatter j+1 and reduce j rewrite RS slot (j+1) mod 2 and AG slot j mod 2,
// which held c_(j-1)'s slices and c_(j-2)'s results: the peer read them in
// its reduce j-1 and its gather j-2, before the signal of its step j-1,
// which this rank received at the top of step j. Every write of the call
// lies in half s, so no closing exchange is needed. Input slices of c_j
// are read (scatter j, reduce j) before output c_j is written (reduce j,
// gather j), so input and output may be the same memory.
//
// HCM (World == 8, hybrid cube mesh, count*size <= buffer/2): Extra packs
// the three quad peers in bytes 0–2, the cross-quad neighbour in byte 3 and,
// in bits 32–63, half: the byte offset of the partial sums in every buffer
// (a multiple of 16, at least count*size; the host passes
// HCMPartialOffset(bufferSize)). Kernels given 0 there use count*size
// rounded up to 16.
//  1. copy input to bufs[me][0:n); 2. Barrier(all);
//  3. bufs[me][half:half+n) = reduce over the quad {me, q0, q1, q2} in
//     ascending rank order, rounded to the element type;
//  4. Barrier(all);
//  5. output = partial of the quad holding the smaller rank, combined with
//     the other quad's partial (read from the neighbour at half), in that
//     order;
//  6. Barrier(all).
//
// # Reduce-scatter, all-gather, broadcast and all-to-all
//
// The data-movement kernels (Movers; KernelName(a, dtype)) take
// AllReduceArgs too, with Count the elements of one rank's block in this
// launch and Extra as below; they agree on the call like the all-reduce
// kernels (the Record's Info carries the algorithm). Every rank copies
// what its peers need into its own symmetric buffer, then every rank
// reads what it needs straight from the peers' buffers, between two
// barriers:
//
//  1. copy in (skipped where the input already is that part of bufs[me]);
//  2. Barrier(all), whose first signal is followed by the agreement check;
//  3. write the output from the buffers (never from the input, so input
//     and output may overlap in any way);
//  4. Barrier(all), so no rank overwrites its buffer while a peer reads it.
//
// With n = Count, S = Extra (0 meaning n) the stride, in elements,
// between rank blocks of a strided input or output (the host cuts a large
// call into launches of n <= S elements per block, each at its offset),
// and P = n*size rounded up to 16 bytes the byte stride of the parts of a
// buffer (so every part starts 16-byte aligned):
//
//	ReduceScatter  in: World blocks at in+r*S; part r of bufs[me] = in block r;
//	               out[0, n) = reduce over r (ascending) of part me of bufs[r]
//	AllGather      bufs[me][0, n) = in[0, n); out block r at out+r*S = bufs[r][0, n)
//	Broadcast      Extra is the root; the root copies in[0, n) to bufs[root];
//	               out[0, n) = bufs[root][0, n) on every rank
//	AllToAll       part r of bufs[me] = in block r (at in+r*S);
//	               out block r (at out+r*S) = part me of bufs[r]
//
// where part r of a buffer is its n elements at byte r*P.
//
// Up to OneShotLLMax(World) bytes per block (n*size), a launch takes the
// LL path instead (MoverPath "ll"): no symmetric buffer and no barrier. It
// is the one-shot's LL path with other contents (same slots, lines, flag,
// clearing and epoch; the epoch argument there holds because every rank
// waits for lines from every peer):
//
//  1. every rank writes, as LL lines, what peer p needs into its region of
//     slot s of p's pad: its input (all-gather; broadcast: the root) or its
//     input block p (reduce-scatter, all-to-all). In a broadcast every
//     rank but the root writes every peer a token instead: one 16-byte
//     vector of zeros (lines 0 and 1 of its region), so that every rank
//     hears from every peer in every call, as the epoch argument needs (a
//     rank that heard only from the root could run two calls ahead of a
//     third rank and overwrite a line it has not read);
//  2. every rank waits for, reads and clears the lines it is sent, then
//     writes the output as in step 3 of the push path below;
//  3. epoch = E+1.
//
// Up to OneShotPushMax(World) bytes per block, a launch takes the push
// path (MoverPath "push"): no symmetric buffer and one barrier. It
// reads E and leaves E+1 like the one-shot's push path and uses the same
// slots (the epoch argument there holds: every rank waits for every peer's
// signal):
//
//  1. every rank writes what peer p needs at PushData(World, s, me, p) of
//     p's pad: its input (all-gather; broadcast: the root only) or its
//     input block p (reduce-scatter, all-to-all);
//  2. Barrier(all), whose first signal is followed by the agreement check;
//  3. the output from this rank's own pad (the region of sender r at
//     PushData(World, s, r, me)) and, for this rank's own part, its input:
//     all-gather out block r, all-to-all out block r, broadcast out (from
//     the root), reduce-scatter out = reduce over r of block me of r's
//     input, ascending;
//  4. epoch = E+1.
//
// With MoverPipeline set in Extra (the rest of Extra as above), a launch
// of any n takes the pipelined path instead: no symmetric buffer. It is
// the world-2 Pipeline's schedule (see Pipeline) at every world size, with
// the chunks of MoverPipelineChunk(n*size, World, G) at
// PipelineSlot(n*size, World, s, src, dst, b, G, j mod 2) and a data-movement
// collective's contents: "write j" stores chunk c_j of what peer p needs
// (as in step 1 of the push path) into p's slot, and "output[chunk c_j] =
// reduce ..." becomes the output of chunk c_j of every block, as in step 3
// of the push path, from the slots of this rank's pad and its own input.
// In a broadcast only the root writes, and every rank still signals every
// peer. A rank reads input chunk c_j a step before it writes output chunk
// c_j, so input and output may overlap as the ABI allows; the buffer is
// not used.
//
// A pipelined broadcast from three ranks on (BroadcastRelays) is relayed
// instead, so that the root sends each byte once rather than World-1
// times: a chunked scatter + all-gather on the scattered Pipeline's slots
// (PipelineScatterSlot, Q = PipelineSlice(World, G)). A chunk is
// RelayChunk(World, G) = (World-1)*Q bytes, cut into World-1 slices of Q
// bytes: slice o belongs to the rank that is o-th among the ranks other
// than the root (rank o + (o >= root)). Chunks c_j = b + j*G as above.
// "Scatter j" (the root only) stores slice o of chunk c_j of its input,
// zero-padded to 16 bytes, into RS slot j mod 2 of its owner's pad.
// "Relay j" (every rank but the root) copies its own slice of c_j from
// the root's RS slot j mod 2 of its pad into its output and into AG slot
// j mod 2 of the pad of every other rank but the root; the root instead
// copies input c_j to its output, unless they are the same memory.
// "Gather j" (every rank but the root) copies each other non-root rank's
// slice of c_j from that rank's AG slot j mod 2 of its pad into its
// output.
//  1. if S > 0: scatter 0, signal;
//  2. for j < S: WaitSignal(p, b) for every peer p (the first is followed by
//     the agreement check); gather j-1 if j > 0; scatter j+1 if j+1 < S;
//     relay j; signal;
//  3. if S > 0: WaitSignal(p, b) for every peer p; gather S-1.
//
// The slots are freed as in the scattered Pipeline, whose steps these
// are, and every write lies in half s.
//
// Otherwise the buffer must hold World*P bytes for ReduceScatter and AllToAll, n
// elements for the others (the host checks; the kernels cannot). An output that
// overlaps a symmetric buffer is refused (the host refuses it first; the
// fake's kernels report StatusBadArgs). Reductions follow the all-reduce's rules
// (ascending rank order, float32 accumulation for 16-bit types, once
// rounded).
package kernels

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/intranode/intranode/backend"
)

// ModuleName is the built-in module every backend provides.
const ModuleName = "intranode/collectives"

// MaxRanks is the largest group (kMaxDevices).
const MaxRanks = 8

// Signal pad layout.
const (
	NumChannels    = 192
	KernelChannels = 128
	InboxOffset    = 0
	SentOffset     = NumChannels * MaxRanks * 4
	RecvOffset     = 2 * NumChannels * MaxRanks * 4
	StateOffset    = 3 * NumChannels * MaxRanks * 4
	// StateSize is the per-rank P2P state area (kP2pStateSize).
	StateSize = 2048
	// EpochWord counts the one-shot LL and push calls and the Pipeline calls
	// made on the pad (uint32); TicketWord is the device kernel's scratch for
	// updating it once per launch. Both are local to the rank.
	EpochWord  = StateOffset
	TicketWord = StateOffset + 4
	// RecordOffset holds the rank's latest Record (RecordSize bytes,
	// local); callIn words, which peers write, start at CallInOffset (see
	// CallInWord).
	RecordOffset = StateOffset + 16
	RecordSize   = 24
	CallInOffset = StateOffset + 64
	// ProbeOffset holds ProbeSize bytes a rank writes into its own pad at
	// rendezvous for peers to read back through their mappings (the
	// peer-access check of package symmetric); ProbeChannel is the channel
	// of that check's barrier. No kernel touches either.
	ProbeOffset  = StateOffset + 256
	ProbeSize    = 64
	ProbeChannel = NumChannels - 1
	// ConfirmChannel carries ConfirmKernel's signals.
	ConfirmChannel = KernelChannels + 1
	// FailedWord is the index of the uint32 after a status word that a
	// comm sets, for good, before it aborts its vendor communicator:
	// ConfirmKernel reads it (Status + 4 bytes).
	FailedWord = 1
	// LLOffset and LLSize place the area the one-shot LL path receives
	// into: two slots of World-1 regions (one per sending peer) of
	// LLRegion(World) bytes.
	LLOffset = StateOffset + StateSize
	LLSize   = 1 << 20
	// PushOffset and PushSize place the area the one-shot push path
	// receives into: two slots of World-1 regions of OneShotPushMax(World)
	// bytes. 64 MiB gives every world to 4 the whole OneShotPushMaxBytes
	// per region, which sets the scattered Pipeline's step (16 MiB held
	// its world-4 steps to 2.67 MiB and its bus bandwidth to 253 GB/s on
	// 4×H200).
	PushOffset    = LLOffset + LLSize
	PushSize      = 64 << 20
	SignalPadSize = PushOffset + PushSize
	// OneShotLLMaxBytes and OneShotPushMaxBytes bound the LL and push paths
	// of the one-shot at any world (see OneShotLLMax, OneShotPushMax).
	OneShotLLMaxBytes   = 256 << 10
	OneShotPushMaxBytes = 8 << 20
	// PushSplitBytes: push-path messages over this go in two rounds.
	PushSplitBytes = 2 << 20
)

// OneShotLLMax is the largest message, in bytes, that the one-shot kernels
// send through the LL path at this world size: OneShotLLMaxBytes, or less
// where the LL area cannot hold two slots of World-1 messages at two line
// bytes per payload byte. A multiple of 16.
func OneShotLLMax(world int) int {
	if world <= 1 {
		return OneShotLLMaxBytes
	}
	return min(OneShotLLMaxBytes, LLSize/(4*(world-1))&^15)
}

// LLRegion is the byte size of one sender's region of one LL slot.
func LLRegion(world int) int { return 2 * OneShotLLMax(world) }

// OneShotPushMax is the largest message, in bytes, that the one-shot
// kernels send through the push path (when it is over OneShotLLMax):
// OneShotPushMaxBytes, or less where the push area cannot hold two slots
// of World-1 messages. A multiple of 16, and the size of one sender's
// region of one push slot.
func OneShotPushMax(world int) int {
	if world <= 1 {
		return OneShotPushMaxBytes
	}
	return min(OneShotPushMaxBytes, PushSize/(2*(world-1))&^15)
}

// PushData is the byte offset, in the receiving rank dst's pad, of the
// data rank src pushes in slot s.
func PushData(world, s, src, dst int) int {
	idx := src
	if src > dst {
		idx--
	}
	return PushOffset + (s*(world-1)+idx)*OneShotPushMax(world)
}

// PipelineWideBytes: Pipeline messages of more bytes than this use both
// halves of the push area (see the package documentation).
const PipelineWideBytes = 16 << 20

// MoverPipeline is the bit of a data-movement launch's Extra that asks for
// its pipelined path (see "Reduce-scatter, all-gather, broadcast and
// all-to-all" in the package documentation).
const MoverPipeline = 1 << 62

// MoverSync is the bit of a data-movement launch's Extra (all-gather,
// broadcast, all-to-all; the rest of Extra as without it) that asks for
// the copy path's agreement instead of any data movement: block 0 makes
// one Barrier(all) on its channel whose first signal carries the Call and
// is checked, as every path's first barrier is, and the launch touches
// neither buffer nor output. The host's copy engines move the data
// between two such launches (collective's Copy): the first tells each
// rank that every peer has reached the call, so its input is ready; the
// second that every peer has finished reading. Any grid works; one block
// is enough.
const MoverSync = 1 << 61

// MoverModes are the bits of Extra that select a data-movement path.
const MoverModes = MoverPipeline | MoverSync

// MoverPipelineChunk is the byte size of one chunk of a pipelined
// data-movement launch with blocks of n bytes and grid blocks, at any world
// size (the world-2 Pipeline's chunk): 0 when the grid is too large for the
// push area.
func MoverPipelineChunk(n, world, grid int) int {
	if grid < 1 {
		return 0
	}
	c := OneShotPushMax(world) / grid &^ 15
	if n <= PipelineWideBytes {
		c = c / 2 &^ 15
	}
	if c < 16 {
		return 0
	}
	return c
}

// PipelineChunk is the byte size of one chunk of the Pipeline kernel for
// an n-byte message launched with grid blocks (a chunk slot's size, or
// World slices where the Pipeline scatters): 0 when the grid is too large
// for the push area at this world size.
func PipelineChunk(n, world, grid int) int {
	if PipelineScatters(world) {
		return world * PipelineSlice(world, grid)
	}
	return MoverPipelineChunk(n, world, grid)
}

// PipelineSlot is the byte offset, in the receiving rank dst's pad, of chunk
// slot k (0 or 1) of block b that rank src writes in a Pipeline call of n
// bytes (where the Pipeline does not scatter) or a pipelined data-movement
// launch with blocks of n bytes, in epoch slot s, launched with grid
// blocks.
func PipelineSlot(n, world, s, src, dst, b, grid, k int) int {
	half := s
	if n > PipelineWideBytes && k == 1 {
		half, k = 1-s, 0
	}
	return PushData(world, half, src, dst) + b*(OneShotPushMax(world)/grid&^15) + k*MoverPipelineChunk(n, world, grid)
}

// BroadcastRelays reports whether a pipelined broadcast is relayed (a
// chunked scatter from the root + all-gather among the others) at this
// world size: from three ranks on.
func BroadcastRelays(world int) bool { return world >= 3 }

// RelayChunk is the byte size of one chunk of a relayed broadcast
// (BroadcastRelays) launched with grid blocks: World-1 slices of
// PipelineSlice bytes, 0 when the grid is too large for the push area.
func RelayChunk(world, grid int) int { return (world - 1) * PipelineSlice(world, grid) }

// PipelineScatters reports whether the Pipeline runs scattered (a chunked
// reduce-scatter + all-gather) at this world size: from three ranks on.
func PipelineScatters(world int) bool { return world >= 3 }

// PipelineSlice is the byte size Q of one slot of the scattered Pipeline
// launched with grid blocks, and of the slice of a chunk that each rank
// owns: 0 when the grid is too large for the push area.
func PipelineSlice(world, grid int) int {
	if grid < 1 {
		return 0
	}
	q := OneShotPushMax(world) / grid &^ 15 / 4 &^ 15
	if q < 16 {
		return 0
	}
	return q
}

// PipelineScatterSlot is the byte offset, in the receiving rank dst's pad,
// of slot k of block b of the scattered Pipeline that rank src writes in
// epoch slot s: k = 0, 1 the reduce-scatter slots, 2, 3 the all-gather
// slots.
func PipelineScatterSlot(world, s, src, dst, b, grid, k int) int {
	return PushData(world, s, src, dst) + b*(OneShotPushMax(world)/grid&^15) + k*PipelineSlice(world, grid)
}

// OneShotPath names the path a one-shot kernel takes for n bytes.
func OneShotPath(n, world int) string {
	switch {
	case n > 0 && n <= OneShotLLMax(world):
		return "ll"
	case n > 0 && n <= OneShotPushMax(world):
		return "push"
	}
	return "classic"
}

// LLLine is the byte offset, in the receiving rank dst's pad, of line j
// sent by rank src in slot s.
func LLLine(world, s, src, dst, j int) int {
	idx := src
	if src > dst {
		idx--
	}
	return LLOffset + (s*(world-1)+idx)*LLRegion(world) + 16*j
}

// InboxWord is the byte offset of inbox[ch][src].
func InboxWord(ch, src int) int { return InboxOffset + (ch*MaxRanks+src)*4 }

// SentWord is the byte offset of sent[ch][dst].
func SentWord(ch, dst int) int { return SentOffset + (ch*MaxRanks+dst)*4 }

// RecvWord is the byte offset of recv[ch][src].
func RecvWord(ch, src int) int { return RecvOffset + (ch*MaxRanks+src)*4 }

// CallInWord is the byte offset, in a rank's pad, of the uint64 that
// rank src writes its Call into for calls with sequence parity p.
func CallInWord(src, p int) int { return CallInOffset + (src*2+p)*8 }

// Status codes in the low byte of the status word.
const (
	StatusOK      = 0
	StatusTimeout = 1
	StatusBadArgs = 2
	// StatusMismatch: the peer in the status word made a different call.
	StatusMismatch = 3
	// StatusClosed is written by the host, not a kernel: the comm was
	// aborted (collective.Comm.Abort: ncclCommAbort, intranodeCommAbort)
	// while a call may still be waiting. A kernel's waits that watch the
	// status word (those of calls with a Call) see a set word and stop, so
	// the frees that follow do not wait out the kernel's deadline.
	StatusClosed = 4
)

// AlgoID numbers the kernel algorithms in a Record's Info.
// (1–4 the all-reduce algorithms, 5–8 the data-movement collectives; 0
// for anything else).
func AlgoID(a Algo) uint32 {
	if i := slices.Index(AllReduceAlgos, a); i >= 0 {
		return uint32(i + 1)
	}
	if i := slices.Index(Movers, a); i >= 0 {
		return uint32(len(AllReduceAlgos) + i + 1)
	}
	return 0
}

// AlgoByID is the inverse of AlgoID ("" for an unknown number).
func AlgoByID(id uint32) Algo {
	switch n := int(id); {
	case n >= 1 && n <= len(AllReduceAlgos):
		return AllReduceAlgos[n-1]
	case n > len(AllReduceAlgos) && n <= len(AllReduceAlgos)+len(Movers):
		return Movers[n-len(AllReduceAlgos)-1]
	}
	return ""
}

// CallInfo packs algo, dtype and op for a Record: the AlgoID in bits
// 16–29 (bits 30 and 31 are InfoSync and InfoPipelined), the dtype in
// 8–15, the op in 0–7.
func CallInfo(a Algo, d backend.DType, op backend.ReduceOp) uint32 {
	return AlgoID(a)<<16 | uint32(d&0xff)<<8 | uint32(op&0xff)
}

// InfoPipelined is set in a Record's Info (and so in its Call's
// fingerprint) by a data-movement launch on the pipelined path
// (MoverPipeline in Extra): ranks on it and on the Direct path make
// different calls.
const InfoPipelined uint32 = 1 << 31

// InfoSync is set in a Record's Info (and its Call's fingerprint) by a
// data-movement launch that is the copy path's agreement (MoverSync in
// Extra).
const InfoSync uint32 = 1 << 30

// LaunchInfo is the Info of a launch of algorithm a with this Extra:
// CallInfo, with InfoPipelined for a data-movement launch whose Extra asks
// for the pipelined path and InfoSync for the copy path's agreement.
func LaunchInfo(a Algo, d backend.DType, op backend.ReduceOp, extra uint64) uint32 {
	info := CallInfo(a, d, op)
	if a.IsMover() && extra&MoverPipeline != 0 {
		info |= InfoPipelined
	}
	if a.IsMover() && extra&MoverSync != 0 {
		info |= InfoSync
	}
	return info
}

// CallTag is the Call of the seq-th all-reduce launch of a comm: seq in
// bits 32–63, a fingerprint of (algo, count, dtype, op) in bits 0–31,
// never 0.
func CallTag(seq uint32, a Algo, count uint64, d backend.DType, op backend.ReduceOp) uint64 {
	return CallTagOf(seq, CallInfo(a, d, op), count)
}

// CallTagOf is CallTag for a launch whose Info (LaunchInfo) is info.
func CallTagOf(seq uint32, info uint32, count uint64) uint64 {
	return uint64(seq)<<32 | uint64(fingerprint(info, count))
}

// fingerprint mixes info and count into 32 bits with the low bit set
// (splitmix64's finaliser).
func fingerprint(info uint32, count uint64) uint32 {
	x := count*0x9e3779b97f4a7c15 ^ uint64(info)<<32 ^ uint64(info)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return uint32(x) | 1
}

// LLFlag is the flag of the LL lines of the launch with this epoch and
// Call: the epoch's low byte in bits 24–31, 23 bits of the Call's hash in
// bits 1–23 (0 for Call 0), bit 0 set.
func LLFlag(epoch uint32, call uint64) uint32 {
	h := uint32(call>>32)*0x9e3779b1 ^ uint32(call)
	return (epoch&0xff)<<24 | (h>>9)<<1 | 1
}

// LLMismatch reports whether an LL half-line flag g, seen where a launch
// of flag f waits, was written by a differing call of the same epoch.
func LLMismatch(g, f uint32) bool { return g != f && g&1 == 1 && g>>24 == f>>24 }

// Record is what a launch leaves in its rank's pad at RecordOffset.
type Record struct {
	Call  uint64
	Count uint64
	Info  uint32
}

// Seq is the call number of the record.
func (r Record) Seq() uint32 { return uint32(r.Call >> 32) }

// Algo is the record's algorithm.
func (r Record) Algo() Algo { return AlgoByID(r.Info >> 16 & 0x3fff) }

// Pipelined reports whether the record's launch took a data-movement
// collective's pipelined path.
func (r Record) Pipelined() bool { return r.Info&InfoPipelined != 0 }

// Synced reports whether the record's launch was the copy path's
// agreement (MoverSync).
func (r Record) Synced() bool { return r.Info&InfoSync != 0 }

// DType is the record's element type.
func (r Record) DType() backend.DType { return backend.DType(r.Info >> 8 & 0xff) }

// Op is the record's reduction.
func (r Record) Op() backend.ReduceOp { return backend.ReduceOp(r.Info & 0xff) }

// String describes the call, e.g. "call 5: one_shot of 1024 bfloat16 sum".
func (r Record) String() string {
	if r.Call == 0 {
		return "no call yet"
	}
	name := string(r.Algo())
	if r.Pipelined() {
		name = "pipelined " + name
	}
	if r.Synced() {
		name = "copied " + name
	}
	if a := r.Algo(); a.IsMover() && a != ReduceScatter {
		return fmt.Sprintf("call %d: %s of %d %v", r.Seq(), name, r.Count, r.DType())
	}
	return fmt.Sprintf("call %d: %s of %d %v %v", r.Seq(), name, r.Count, r.DType(), r.Op())
}

// EncodeRecord lays a record out as the kernels store it.
func EncodeRecord(r Record) []byte {
	b := make([]byte, RecordSize)
	binary.LittleEndian.PutUint64(b[0:], r.Call)
	binary.LittleEndian.PutUint64(b[8:], r.Count)
	binary.LittleEndian.PutUint32(b[16:], r.Info)
	return b
}

// DecodeRecord is the inverse of EncodeRecord.
func DecodeRecord(b []byte) Record {
	_ = b[RecordSize-1]
	return Record{Call: binary.LittleEndian.Uint64(b[0:]), Count: binary.LittleEndian.Uint64(b[8:]),
		Info: binary.LittleEndian.Uint32(b[16:])}
}

// EncodeStatus packs a status word: code in bits 0–7, peer in 8–15,
// channel in 16–23.
func EncodeStatus(code, peer, ch int) uint32 {
	return uint32(code&0xff) | uint32(peer&0xff)<<8 | uint32(ch&0xff)<<16
}

// DecodeStatus unpacks a status word.
func DecodeStatus(w uint32) (code, peer, ch int) {
	return int(w & 0xff), int(w >> 8 & 0xff), int(w >> 16 & 0xff)
}

// Kernel names.
const (
	BarrierKernel = "intranode_barrier"
	// ConfirmKernel (SignalArgs) is the barrier that follows each call
	// through the vendor library, on ConfirmChannel: unless the comm has
	// failed on this rank (FailedWord set), it signals the ranks of Mask
	// and waits for theirs. A peer that gave up on the call and aborted
	// its vendor communicator never confirms it, so a rank whose vendor
	// call completed on what the aborted peer's kernels posted (NCCL's
	// still post their steps once aborted) times out there, naming that
	// peer, instead of returning the result.
	ConfirmKernel    = "intranode_confirm"
	PutSignalKernel  = "intranode_put_signal"
	WaitSignalKernel = "intranode_wait_signal"
)

// Algo is a kernel algorithm: one of the all-reduce algorithms or one of
// the data-movement collectives.
type Algo string

// The all-reduce algorithms.
const (
	OneShot  Algo = "one_shot"
	TwoShot  Algo = "two_shot"
	HCM      Algo = "hcm"
	Pipeline Algo = "pipeline"
)

// The data-movement collectives (see "Reduce-scatter, all-gather,
// broadcast and all-to-all" in the package documentation).
const (
	ReduceScatter Algo = "reduce_scatter"
	AllGather     Algo = "all_gather"
	Broadcast     Algo = "broadcast"
	AllToAll      Algo = "all_to_all"
)

// Divide is the division kernel, the second half of an average
// (backend.Avg, a Sum followed by it): Output[i] = Input[i] / World for
// Count elements, in DType's reduction type (float for float16 and
// bfloat16) rounded once to nearest even; int32 divides as C does,
// toward zero. It takes AllReduceArgs but reads only Input, Output,
// Count, World, DType and Status: no pad, no peer, no Call (it has no
// AlgoID). Input may equal Output; both must be aligned to the element.
// It may be launched Early. Any grid works; collective's divideConfig
// gives 512 threads a block and a block per 8 KiB (one 16-byte vector a
// thread), up to 1024 blocks.
const Divide Algo = "divide"

// KernelNames lists every kernel of the module ModuleName, as each
// backend's image must have them: the signal kernels, then, for every
// dtype, each all-reduce algorithm's, each data-movement collective's and
// the division's.
func KernelNames() []string {
	names := []string{BarrierKernel, ConfirmKernel, PutSignalKernel, WaitSignalKernel}
	algos := append(append(slices.Clone(AllReduceAlgos), Movers...), Divide)
	for _, d := range backend.DTypes {
		for _, a := range algos {
			names = append(names, KernelName(a, d))
		}
	}
	return names
}

// AllReduceAlgos lists the all-reduce algorithms and Movers the
// data-movement collectives, in AlgoID order.
var (
	AllReduceAlgos = []Algo{OneShot, TwoShot, HCM, Pipeline}
	Movers         = []Algo{ReduceScatter, AllGather, Broadcast, AllToAll}
)

// MoverPath names the path a data-movement kernel takes for blocks of n
// bytes: "ll" when 0 < n <= OneShotLLMax(world), "push" when
// OneShotLLMax(world) < n <= OneShotPushMax(world), else "classic".
func MoverPath(n, world int) string {
	switch {
	case n > 0 && n <= OneShotLLMax(world):
		return "ll"
	case n > 0 && n <= OneShotPushMax(world):
		return "push"
	}
	return "classic"
}

// MoverPart is P, the byte stride of the parts of a buffer in a
// data-movement launch of count elements of size bytes per block.
func MoverPart(count uint64, size int) uint64 { return (count*uint64(size) + 15) &^ 15 }

// IsMover reports whether a is a data-movement collective.
func (a Algo) IsMover() bool { return slices.Contains(Movers, a) }

// KernelName names the kernel of an algorithm (an all-reduce algorithm or
// a data-movement collective) for one element type, e.g.
// "intranode_one_shot_bf16", "intranode_all_gather_f32".
func KernelName(a Algo, d backend.DType) string {
	return fmt.Sprintf("intranode_%s_%s", a, shortName(d))
}

func shortName(d backend.DType) string {
	switch d {
	case backend.Float32:
		return "f32"
	case backend.Float16:
		return "f16"
	case backend.BFloat16:
		return "bf16"
	case backend.Float64:
		return "f64"
	case backend.Int32:
		return "i32"
	}
	return "unknown"
}

// AllReduceArgs are the arguments of every all-reduce kernel, in order.
type AllReduceArgs struct {
	Bufs      backend.DevicePtr // device array of World uint64: symmetric buffers
	Pads      backend.DevicePtr // device array of World uint64: signal pads
	Input     backend.DevicePtr
	Output    backend.DevicePtr
	Count     uint64 // elements
	Rank      uint32
	World     uint32
	DType     backend.DType
	Op        backend.ReduceOp
	Status    backend.DevicePtr // uint32 status word (host-mapped)
	TimeoutNs uint64
	Extra     uint64 // HCM neighbours; 0 otherwise
	Call      uint64 // CallTag of this launch; 0: no agreement check
}

// AllReduceArgCount is how many launch arguments AllReduceArgs has.
const AllReduceArgCount = 13

// Args returns the launch arguments.
func (a AllReduceArgs) Args() []backend.Arg {
	var d [AllReduceArgCount]backend.Arg
	return a.Put(&d)
}

// Put writes the launch arguments into d and returns them as a slice of
// it, so that a caller launching often can keep one array (an eager
// call's host path allocates nothing for them).
func (a AllReduceArgs) Put(d *[AllReduceArgCount]backend.Arg) []backend.Arg {
	*d = [AllReduceArgCount]backend.Arg{
		backend.Ptr(a.Bufs), backend.Ptr(a.Pads), backend.Ptr(a.Input), backend.Ptr(a.Output),
		backend.U64(a.Count), backend.U32(a.Rank), backend.U32(a.World),
		backend.U32(uint32(a.DType)), backend.U32(uint32(a.Op)),
		backend.Ptr(a.Status), backend.U64(a.TimeoutNs), backend.U64(a.Extra), backend.U64(a.Call),
	}
	return d[:]
}

// ParseAllReduceArgs is the inverse of Args, for Go kernels.
func ParseAllReduceArgs(args []backend.Arg) (AllReduceArgs, error) {
	if len(args) != AllReduceArgCount {
		return AllReduceArgs{}, backend.Errorf(backend.CodeInvalidArgument, "all-reduce kernel: %d arguments, want %d", len(args), AllReduceArgCount)
	}
	return AllReduceArgs{
		Bufs: args[0].Ptr(), Pads: args[1].Ptr(), Input: args[2].Ptr(), Output: args[3].Ptr(),
		Count: args[4].U64(), Rank: args[5].U32(), World: args[6].U32(),
		DType: backend.DType(args[7].U32()), Op: backend.ReduceOp(args[8].U32()),
		Status: args[9].Ptr(), TimeoutNs: args[10].U64(), Extra: args[11].U64(), Call: args[12].U64(),
	}, nil
}

// SignalArgs are the arguments of the barrier, put and wait kernels, in
// order. Peer is the destination (put) or source (wait); Mask is the set of
// ranks taking part in a barrier (bit r for rank r).
type SignalArgs struct {
	Pads      backend.DevicePtr
	Rank      uint32
	World     uint32
	Peer      uint32
	Channel   uint32
	Mask      uint32
	Status    backend.DevicePtr
	TimeoutNs uint64
}

// Args returns the launch arguments.
func (a SignalArgs) Args() []backend.Arg {
	return []backend.Arg{
		backend.Ptr(a.Pads), backend.U32(a.Rank), backend.U32(a.World), backend.U32(a.Peer),
		backend.U32(a.Channel), backend.U32(a.Mask), backend.Ptr(a.Status), backend.U64(a.TimeoutNs),
	}
}

// ParseSignalArgs is the inverse of Args, for Go kernels.
func ParseSignalArgs(args []backend.Arg) (SignalArgs, error) {
	if len(args) != 8 {
		return SignalArgs{}, backend.Errorf(backend.CodeInvalidArgument, "signal kernel: %d arguments, want 8", len(args))
	}
	return SignalArgs{
		Pads: args[0].Ptr(), Rank: args[1].U32(), World: args[2].U32(), Peer: args[3].U32(),
		Channel: args[4].U32(), Mask: args[5].U32(), Status: args[6].Ptr(), TimeoutNs: args[7].U64(),
	}, nil
}

// SliceElems is the two-shot slice length for count elements over world
// ranks: ceil(count/world) rounded up so every slice starts on a 16-byte
// boundary.
func SliceElems(count uint64, world int, elemSize int) uint64 {
	vec := uint64(16 / elemSize)
	per := (count + uint64(world) - 1) / uint64(world)
	return (per + vec - 1) / vec * vec
}

// SliceRange returns slice r's element range [lo, hi) (possibly empty).
func SliceRange(count uint64, world, r, elemSize int) (lo, hi uint64) {
	s := SliceElems(count, world, elemSize)
	lo = min(uint64(r)*s, count)
	hi = min(lo+s, count)
	return lo, hi
}

// HCMPartialOffset is where HCM keeps quad partial sums in a buffer of the
// given size: the upper half, 16-byte aligned.
func HCMPartialOffset(bufferSize int) int { return bufferSize / 2 &^ 15 }

// PackHCM packs quad peers, the cross neighbour and the partial-sum offset
// for AllReduceArgs.Extra.
func PackHCM(quad [3]int, cross int, partialOffset int) uint64 {
	return uint64(quad[0]) | uint64(quad[1])<<8 | uint64(quad[2])<<16 | uint64(cross)<<24 | uint64(partialOffset)<<32
}

// UnpackHCM is the inverse of PackHCM.
func UnpackHCM(x uint64) (quad [3]int, cross int, partialOffset int) {
	return [3]int{int(x & 0xff), int(x >> 8 & 0xff), int(x >> 16 & 0xff)}, int(x >> 24 & 0xff), int(x >> 32)
}
