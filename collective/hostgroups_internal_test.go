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
