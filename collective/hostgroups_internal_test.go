package collective

import (
	"context"
	"errors"
	"fmt"
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
			defer func() { require.NoError(t, c.close()) }()
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
