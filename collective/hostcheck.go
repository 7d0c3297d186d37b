package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/closing"
	"github.com/intranode/intranode/symmetric"
)

// The call check across hosts. Inside a host the Comm's kernels compare
// the ranks' calls; the inter-host engine (NCCL) compares nothing, and
// ranks whose calls differ only between hosts would hang in it or get
// wrong sums silently. Nor does a step inside one host that failed (a
// kernel that timed out waiting for a dead peer records that in its
// comm's status word and returns, and the stream goes on) stop the engine
// from passing that rank's stale data to the other hosts. So right before
// a HostGroups call's first step on the engine, every member of that step
// puts a record of its call (sequence number, collective, count, dtype,
// op, path) and its comm's status word so far into an all-gather, and the
// gathered records are copied to pinned host memory. The records travel on
// a communicator of their own among the same members (the path's check
// communicator) and on a stream of their own, forked from the call's
// stream before that step and joined at the call's end, so that they cost
// the call little time: the two communicators' transfers overlap.
// HostWork.Synchronize waits for the records first: a record
// that differs from this rank's is ErrMismatch, naming every member's
// call; a member whose status word is set failed inside its host
// (backend.ErrPeerFailed). Either fails the job's collectives, which aborts
// the engines, so that a data step left hanging ends at once instead of at
// the deadline. The records cost one small all-gather per call
// (HostGroups.NoCallCheck turns it off).
//
// In a job of at most MeshMaxRanks ranks the records travel between the
// CPUs instead (hostmesh.go), and the all-gather here serves only the
// hierarchical calls, for their status words.

// hostRecordSize is the bytes of one member's record in the all-gather:
// the call (16 bytes), the status word (4) and padding.
const (
	hostRecordSize = 24
	statusOffset   = 16
)

// checkSlots is how many calls can be in flight with their records. A call
// that finds its slot still in use waits for the call that last held it;
// a HostWork synchronized after checkSlots later calls are enqueued is not
// judged.
const checkSlots = 32

// hostRecord is one member's record of a HostGroups call.
type hostRecord struct {
	seq   uint32
	op    Op
	dtype backend.DType
	red   backend.ReduceOp
	path  hostPath
	count uint64
	// status is the member's comm's status word before the step (not
	// part of the call's identity).
	status uint32
}

// call is r without its status: what the members must agree on.
func (r hostRecord) call() hostRecord { r.status = 0; return r }

func (r hostRecord) encode(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], r.seq)
	b[4], b[5], b[6], b[7] = byte(r.op), byte(r.dtype), byte(r.red), byte(r.path)
	binary.LittleEndian.PutUint64(b[8:], r.count)
	binary.LittleEndian.PutUint32(b[statusOffset:], r.status)
}

func decodeHostRecord(b []byte) hostRecord {
	return hostRecord{seq: binary.LittleEndian.Uint32(b[0:]), op: Op(b[4]), dtype: backend.DType(b[5]),
		red: backend.ReduceOp(b[6]), path: hostPath(b[7]), count: binary.LittleEndian.Uint64(b[8:]),
		status: binary.LittleEndian.Uint32(b[statusOffset:])}
}

func (r hostRecord) String() string {
	if r.seq == 0 {
		return "no record"
	}
	path := "hierarchical"
	if r.path == pathFlat {
		path = "flat"
	}
	s := fmt.Sprintf("call %d: %v of %d %v", r.seq, r.op, r.count, r.dtype)
	if r.op != OpAllGather {
		s += " " + r.red.String()
	}
	return s + ", " + path
}

// callCheck is a HostGroups' memory for the records: per slot, this rank's
// record and the gathered ones, in pinned host memory and on the device.
type callCheck struct {
	world   int // slot size: records of up to world members
	host    backend.HostAllocation
	dev     backend.Allocation
	side    backend.Stream  // the records' stream
	started []backend.Event // per slot, recorded on the call's stream before the check
	events  []backend.Event // per slot, recorded on side after the gathered copy
	used    []bool          // slots whose event has been recorded
	gen     []uint64        // per slot, the calls that held it
	next    int
}

func (c *callCheck) slotBytes() int { return (1 + c.world) * hostRecordSize }

func newCallCheck(ctx context.Context, d backend.Device, world int) (_ *callCheck, err error) {
	c := &callCheck{world: world, used: make([]bool, checkSlots), gen: make([]uint64, checkSlots)}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()
	n := checkSlots * c.slotBytes()
	if c.host, err = d.AllocHost(ctx, n); err != nil {
		return nil, err
	}
	if c.dev, err = d.Alloc(ctx, n); err != nil {
		return nil, err
	}
	if c.side, err = d.NewStream(ctx); err != nil {
		return nil, err
	}
	for range checkSlots {
		for _, evs := range []*[]backend.Event{&c.started, &c.events} {
			ev, err := d.NewEvent(ctx, false)
			if err != nil {
				return nil, err
			}
			*evs = append(*evs, ev)
		}
	}
	return c, nil
}

// Close releases the records' stream, the slots' events and the record buffers.
func (c *callCheck) Close() error {
	errs := closing.Field(nil, &c.side)
	for _, ev := range append(c.started, c.events...) {
		errs = append(errs, ev.Close())
	}
	errs = closing.Field(errs, &c.dev)
	errs = closing.Field(errs, &c.host)
	return errors.Join(errs...)
}

// pendingCheck is a HostWork's claim on a slot.
type pendingCheck struct {
	c       *callCheck
	slot    int
	gen     uint64
	mine    hostRecord
	members []int // global ranks of the step's members, in its order
	index   int   // this rank's index among members
}

// enqueue starts the check of a call whose next step is on s, among
// members: it waits for the slot's previous call, writes this rank's
// record, and enqueues on the side stream, after the work on s so far, the
// copy of the status word at status (when not 0) into it, the all-gather
// of the records on e and their copy to host memory. Caller holds ih.mu.
func (c *callCheck) enqueue(ctx context.Context, s backend.Stream, e InterHost, rec hostRecord, status backend.DevicePtr,
	members []int, index int) (*pendingCheck, error) {
	slot := c.next
	if c.used[slot] {
		if err := c.events[slot].Synchronize(ctx); err != nil {
			return nil, fmt.Errorf("collective: host groups: waiting for the call %d calls back: %w", checkSlots, err)
		}
	}
	c.next = (c.next + 1) % checkSlots
	c.gen[slot]++
	off := slot * c.slotBytes()
	b := c.host.Bytes()[off : off+c.slotBytes()]
	clear(b)
	rec.encode(b)
	in, out := c.dev.Ptr().Add(off), c.dev.Ptr().Add(off+hostRecordSize)
	n := len(members) * hostRecordSize
	if err := s.Record(c.started[slot]); err != nil {
		return nil, fmt.Errorf("collective: host groups: call check: %w", err)
	}
	s = c.side
	if err := s.WaitEvent(c.started[slot]); err != nil {
		return nil, fmt.Errorf("collective: host groups: call check: %w", err)
	}
	// The whole slot: this rank's record and zeros over the gathered ones,
	// so that a member whose record does not arrive reads as none, not as
	// the record of the slot's call checkSlots calls back.
	if err := s.CopyAsync(in, c.host.Ptr().Add(off), c.slotBytes()); err != nil {
		return nil, fmt.Errorf("collective: host groups: call check: %w", err)
	}
	if status != 0 {
		if err := s.CopyAsync(in.Add(statusOffset), status, 4); err != nil {
			return nil, fmt.Errorf("collective: host groups: call check: %w", err)
		}
	}
	if err := e.AllGather(ctx, s, in, out, hostRecordSize/4, backend.Int32); err != nil {
		return nil, fmt.Errorf("collective: host groups: call check: %w", err)
	}
	if err := s.CopyAsync(c.host.Ptr().Add(off+hostRecordSize), out, n); err != nil {
		return nil, fmt.Errorf("collective: host groups: call check: %w", err)
	}
	if err := s.Record(c.events[slot]); err != nil {
		return nil, fmt.Errorf("collective: host groups: call check: %w", err)
	}
	c.used[slot] = true
	return &pendingCheck{c: c, slot: slot, gen: c.gen[slot], mine: rec, members: members, index: index}, nil
}

// join makes the work enqueued on s from now on wait for p's records.
func (p *pendingCheck) join(s backend.Stream) error {
	if err := s.WaitEvent(p.c.events[p.slot]); err != nil {
		return fmt.Errorf("collective: host groups: call check: %w", err)
	}
	return nil
}

// judge waits for the records of p and compares them with this rank's:
// nil when they agree, or when the slot has since been taken by a later
// call or released, or when this rank's own record is missing (its stream
// failed before the check; that error is the stream's); ErrMismatch naming
// every member's call when they differ; backend.ErrPeerFailed when another
// member's step inside its host failed; the wait's error when the records
// did not arrive within ctx. A member whose record did not arrive (its
// check stopped: its stream failed, or its engines were closed, before the
// all-gather of the records) failed too (backend.ErrPeerFailed): its data
// step may have run all the same and sent this rank stale data.
// The wait holds no lock, so that Close can end a hung job.
func (ih *interHost) judge(ctx context.Context, p *pendingCheck, hosts []string) error {
	c := p.c
	current := func() bool { return ih.check == c && c.gen[p.slot] == p.gen }
	ih.mu.Lock()
	if !current() {
		ih.mu.Unlock()
		return nil
	}
	ev := c.events[p.slot]
	ih.mu.Unlock()
	if err := ev.Synchronize(ctx); err != nil {
		return fmt.Errorf("collective: host groups: waiting for the call check's records: %w", err)
	}
	ih.mu.Lock()
	defer ih.mu.Unlock()
	if !current() {
		return nil
	}
	off := p.slot*c.slotBytes() + hostRecordSize
	b := c.host.Bytes()[off:]
	if decodeHostRecord(b[p.index*hostRecordSize:]).seq == 0 {
		return nil
	}
	recs := make([]hostRecord, len(p.members))
	why := make([]string, len(p.members))
	for i := range p.members {
		if recs[i] = decodeHostRecord(b[i*hostRecordSize:]); recs[i].seq == 0 {
			why[i] = "no record of its call arrived"
		}
	}
	return verdict(p.index, p.mine, p.members, recs, why, hosts)
}

// verdict compares the records of a call's members (global ranks, in the
// check's order; this rank is members[me]) with this rank's record mine:
// nil when they agree; ErrMismatch naming every member's call when one
// differs; backend.ErrPeerFailed when a member's record is missing (why
// says why) or carries a status word, that is, its step inside its host
// failed.
func verdict(me int, mine hostRecord, members []int, recs []hostRecord, why []string, hosts []string) error {
	var differ []int
	var failed []string
	for i, r := range members {
		rec := recs[i]
		switch {
		case why[i] != "":
			failed = append(failed, fmt.Sprintf("rank %d (%s): %s", r, hosts[r], why[i]))
		case rec.call() != mine:
			differ = append(differ, r)
		case rec.status != 0 && i != me:
			failed = append(failed, symmetric.StatusWordError(rec.status, fmt.Sprintf("rank %d (%s) inside its host", r, hosts[r])).Error())
		}
	}
	switch {
	case len(differ) > 0:
		calls := make([]string, len(members))
		for i, r := range members {
			calls[i] = fmt.Sprintf("rank %d (%s) %v", r, hosts[r], recs[i])
		}
		return fmt.Errorf("%w across hosts: rank %d sees ranks %v differ from its own call; %s", ErrMismatch,
			members[me], differ, strings.Join(calls, "; "))
	case len(failed) > 0:
		return backend.Errorf(backend.CodePeerFailed, "collective: host groups: rank %d's %v: %s", members[me], mine, strings.Join(failed, "; "))
	}
	return nil
}
