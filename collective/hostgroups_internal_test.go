package collective

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/symmetric/store"
)

// agreeAll runs the outcome round of JoinHosts on ranks whose joins ended
// with errs, all on one host.
func agreeAll(t *testing.T, errs []error) []*HostGroups {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := store.NewMem()
	defer st.Close()
	world := len(errs)
	hosts := make([]string, world)
	for r := range hosts {
		hosts[r] = "h"
	}
	groups, err := PlanHostGroups(hosts)
	require.NoError(t, err)
	out := make([]*HostGroups, world)
	failures := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := &HostGroups{Rank: r, World: world, Hosts: hosts, Groups: groups, Group: groups[0], LocalRank: r, Err: errs[r]}
			ex, err := store.NewExchange(st, "agree", r, world)
			if err != nil {
				failures[r] = err
				return
			}
			defer ex.Close(ctx)
			failures[r] = h.agree(ctx, ex)
			out[r] = h
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(failures...))
	return out
}

// When one rank of a group fails, the whole group is out, on every rank,
// with the failing rank's reason.
func TestAgreeExcludesTheWholeGroup(t *testing.T) {
	cause := fmt.Errorf("%w: devices [0 1 2] are not fully connected", ErrTopology)
	got := agreeAll(t, []error{nil, cause, nil})
	for r, h := range got {
		require.Len(t, h.Excluded, 3, "rank %d", r)
		require.ErrorIs(t, h.Err, ErrTopology, "rank %d", r)
		require.False(t, h.AllJoined())
		for _, e := range h.Excluded {
			require.ErrorIs(t, e, ErrTopology)
		}
	}
	require.ErrorContains(t, got[0].Err, "rank 1 of the group could not join")
	require.ErrorIs(t, got[1].Err, cause, "the failing rank keeps its own cause")
}

// Reasons that are no refusal still carry their backend code to the other
// ranks.
func TestAgreeCarriesBackendCodes(t *testing.T) {
	got := agreeAll(t, []error{backend.Errorf(backend.CodeTimeout, "rank 0 waited too long"), nil})
	require.ErrorIs(t, got[1].Err, backend.ErrTimeout)
	require.ErrorContains(t, got[1].Err, "rank 0 waited too long")
	for _, r := range refusals {
		require.NotErrorIs(t, got[1].Err, r)
	}
	all := agreeAll(t, []error{nil, nil})
	for _, h := range all {
		require.NoError(t, h.Err)
		require.True(t, h.AllJoined())
	}
}

// TestJudge holds the call check's verdict on gathered records: agreeing
// records pass; a differing one is ErrMismatch; a member whose status word
// is set, or whose record did not arrive (all zeros: the slot is cleared
// before the gather), failed (ErrPeerFailed) — its data step may have run
// all the same and sent stale data; this rank's own record missing passes
// (its stream failed, and that error is the stream's).
func TestJudge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := fake.New(fake.WithDevices(1))
	require.NoError(t, err)
	defer b.Close()
	d, err := b.Open(ctx, 0)
	require.NoError(t, err)
	defer d.Close()
	s, err := d.NewStream(ctx)
	require.NoError(t, err)
	defer s.Close()

	mine := hostRecord{seq: 3, op: OpReduceScatter, dtype: backend.Float32, red: backend.Sum, path: pathHier, count: 3216}
	other := mine
	other.count++
	failed := mine
	failed.status = 1
	hosts := []string{"h0", "h1", "h2"}
	tests := []struct {
		name    string
		records []hostRecord // the gathered records, members 0, 1, 2; this rank is member 0
		want    error        // nil: the call passes
	}{
		{"agree", []hostRecord{mine, mine, mine}, nil},
		{"a member differs", []hostRecord{mine, mine, other}, ErrMismatch},
		{"a member failed inside its host", []hostRecord{mine, failed, mine}, backend.ErrPeerFailed},
		{"a member's record did not arrive", []hostRecord{mine, {}, mine}, backend.ErrPeerFailed},
		{"this rank's own record did not arrive", []hostRecord{{}, mine, mine}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := newCallCheck(ctx, d, len(hosts))
			require.NoError(t, err)
			defer func() { require.NoError(t, c.Close()) }()
			ih := &interHost{check: c}
			b := c.host.Bytes()
			for i, rec := range tt.records {
				rec.encode(b[(1+i)*hostRecordSize:])
			}
			require.NoError(t, s.Record(c.events[0]))
			c.used[0] = true
			p := &pendingCheck{c: c, slot: 0, gen: c.gen[0], mine: mine, members: []int{0, 1, 2}, index: 0}
			err = ih.judge(ctx, p, hosts)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

// formMeshes forms the call check's mesh among world ranks (goroutines)
// meeting in one store.
func formMeshes(t testing.TB, ctx context.Context, world int) []*checkMesh {
	t.Helper()
	st := store.NewMem()
	t.Cleanup(func() { st.Close() })
	ms := make([]*checkMesh, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() { ms[r], errs[r] = formMesh(ctx, st, r, world, time.Minute) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return ms
}

// TestCheckMesh: records sent on the mesh reach every rank and are judged
// there: agreeing records pass, a differing one is ErrMismatch naming
// both calls, a record not sent times out, a rank whose connection closed
// before sending fails (backend.ErrPeerFailed), and a record overwritten
// by a call meshRing calls later is not judged.
func TestCheckMesh(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const world = 3
	hosts := []string{"h0", "h1", "h2"}
	ms := formMeshes(t, ctx, world)
	rec := func(seq uint32, count uint64) hostRecord {
		return hostRecord{seq: seq, op: OpAllReduce, dtype: backend.BFloat16, red: backend.Sum, path: pathFlat, count: count}
	}
	judgeAll := func(seq uint32, counts ...uint64) []error {
		errs := make([]error, world)
		for r, m := range ms {
			if r < len(counts) && counts[r] != 0 {
				m.send(ctx, rec(seq, counts[r]), time.Second)
			}
		}
		for r, m := range ms {
			if r < len(counts) && counts[r] != 0 {
				jctx, jcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				errs[r] = m.judge(jctx, rec(seq, counts[r]), []int{0, 1, 2}, hosts)
				jcancel()
			}
		}
		return errs
	}
	require.NoError(t, errors.Join(judgeAll(1, 8, 8, 8)...))
	for r, err := range judgeAll(2, 8, 8, 9) {
		require.ErrorIs(t, err, ErrMismatch, "rank %d", r)
		require.ErrorContains(t, err, "rank 1 (h1) call 2: all_reduce of 8 bfloat16 sum, flat; rank 2 (h2) call 2: all_reduce of 9 bfloat16 sum, flat")
	}
	// Rank 2 makes no call 3: the others wait for its record until their deadline.
	for r, err := range judgeAll(3, 8, 8)[:2] {
		require.ErrorIs(t, err, backend.ErrTimeout, "rank %d", r)
		require.ErrorContains(t, err, "ranks [2] sent no record of call 3", "rank %d", r)
	}
	// A record overwritten by a later call's is not judged.
	ms[1].send(ctx, rec(4+meshRing, 8), time.Second)
	ms[2].send(ctx, rec(4+meshRing, 8), time.Second)
	require.Eventually(t, func() bool {
		ms[0].mu.Lock()
		defer ms[0].mu.Unlock()
		return ms[0].ring[1][4%meshRing].seq == 4+meshRing && ms[0].ring[2][4%meshRing].seq == 4+meshRing
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, ms[0].judge(ctx, rec(4, 8), []int{0, 1, 2}, hosts))
	// Rank 2 leaves: rank 0's next call fails at once, naming it.
	require.NoError(t, ms[2].Close())
	ms[1].send(ctx, rec(5, 8), time.Second)
	err := ms[0].judge(ctx, rec(5, 8), []int{0, 1, 2}, hosts)
	require.ErrorIs(t, err, backend.ErrPeerFailed)
	require.ErrorContains(t, err, "rank 2 (h2): its records stopped before its call 5: its connection closed")
	for _, m := range ms[:2] {
		require.NoError(t, m.Close())
	}
}

// TestCheckMeshAdmit: the listener admits a peer only with a hello that
// carries the listener's token and the peer's own, once per peer; anyone
// else's connection is closed without an answer.
func TestCheckMeshAdmit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ms := formMeshes(t, ctx, 3)
	defer func() {
		for _, m := range ms {
			require.NoError(t, m.Close())
		}
	}()
	m := ms[0]
	wrongToken := m.hello(0, 1)
	wrongToken[len(wrongToken)-1]++
	for name, hello := range map[string][]byte{
		"the peer's token wrong":   wrongToken,
		"to another rank":          m.hello(2, 1),
		"from itself":              m.hello(0, 0),
		"a peer already connected": m.hello(0, 1),
		"short":                    m.hello(0, 1)[:10],
		"another protocol's magic": append([]byte("XXXX"), m.hello(0, 1)[4:]...),
	} {
		t.Run(name, func(t *testing.T) {
			srv, cli := net.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				m.admit(srv, time.Now().Add(time.Second))
			}()
			go func() {
				_, _ = cli.Write(hello)
			}()
			_, err := cli.Read(make([]byte, 1))
			require.Error(t, err) // closed, never answered
			<-done
			require.NoError(t, cli.Close())
		})
	}
}

// BenchmarkMeshSend: one call's record written to every other rank of the
// mesh (the caller's side: queued for the writer), for jobs of 2, 4, 8 and MeshMaxRanks ranks.
func BenchmarkMeshSend(b *testing.B) {
	for _, world := range []int{2, 4, 8, MeshMaxRanks} {
		b.Run(fmt.Sprintf("world=%d", world), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ms := formMeshes(b, ctx, world)
			defer func() {
				for _, m := range ms {
					_ = m.Close()
				}
			}()
			rec := hostRecord{op: OpAllReduce, dtype: backend.BFloat16, red: backend.Sum, path: pathFlat, count: 8}
			b.ResetTimer()
			for i := range b.N {
				rec.seq = uint32(i + 1)
				ms[0].send(ctx, rec, time.Second)
			}
		})
	}
}

// TestCheckMeshStuckPeer: a call that finds the writer's queue full gives
// up at its deadline instead of waiting for the writer (the peers miss
// that record); a peer that stops reading holds the writer up to its
// write timeout, then is dropped (its connection closed).
func TestCheckMeshStuckPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	mine, stuck := net.Pipe() // nobody reads stuck
	defer stuck.Close()
	m := &checkMesh{out: []net.Conn{nil, mine}, outq: make(chan hostRecord, meshRing), writing: make(chan struct{})}
	rec := hostRecord{op: OpAllGather, dtype: backend.Int32, path: pathFlat, count: 1}
	// The queue full (the writer not started yet): a call gives up at its
	// deadline.
	for i := range meshRing {
		rec.seq = uint32(i + 1)
		m.send(ctx, rec, time.Minute)
	}
	short, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer scancel()
	rec.seq++
	m.send(short, rec, time.Minute)
	require.ErrorIs(t, short.Err(), context.DeadlineExceeded)
	// The writer's first write to the peer that does not read blocks.
	go m.write(300 * time.Millisecond)
	// Close waits for the writer: its blocked write times out, the peer is
	// dropped, the rest of the queue goes nowhere.
	require.NoError(t, m.Close())
	require.Nil(t, m.out[1])
	_, err := stuck.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
}
