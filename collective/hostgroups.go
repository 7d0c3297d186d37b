package collective

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/closing"
	"github.com/intranode/intranode/symmetric/store"
)

// HostGroup is one intra-node group of a multi-host job: ranks of one host
// that share one Comm.
type HostGroup struct {
	// Host is the host name the group's ranks reported.
	Host string
	// Part numbers the groups of a host whose ranks were split because
	// there are more than MaxDevices of them, from 0; Parts counts them
	// (1 for a host that was not split).
	Part, Parts int
	// Ranks are the group's global ranks, ascending; a rank's index here
	// is its local rank.
	Ranks []int
	// Prefix is where the group's keys live in the job's store:
	// "host/<name>/", or "host/<name>/part<k>/" for a split host.
	Prefix string
}

// RankError says why a rank of the job has no intra-node comm. It matches,
// under errors.Is, the refusal behind it (ErrWorldSize, ErrTopology, …) and
// its backend code (backend.ErrTimeout, …), also when it was reported by
// another rank.
type RankError struct {
	Rank int
	Host string
	Msg  string

	refusal error        // one of the Err… refusals, or nil
	code    backend.Code // the backend code of the cause
	err     error        // the cause itself, on the rank it happened to
}

// Error formats the reason with the rank and host.
func (e *RankError) Error() string {
	return fmt.Sprintf("rank %d on %s: %s", e.Rank, e.Host, e.Msg)
}

// Unwrap returns the refusal, an error carrying the backend code, and on
// the rank that failed, the cause itself.
func (e *RankError) Unwrap() []error {
	var out []error
	if e.err != nil {
		out = append(out, e.err)
	}
	if e.refusal != nil {
		out = append(out, e.refusal)
	}
	if e.code != backend.CodeUnknown {
		out = append(out, &backend.Error{Code: e.code})
	}
	return out
}

// refusals are the reasons a rendezvous refuses, in the order they are
// numbered on the wire (index + 1; 0 is none of them).
var refusals = []error{ErrNotSupported, ErrWorldSize, ErrHostMismatch, ErrOverlappingDevices, ErrTopology}

// HostGroups is one rank's view of a multi-host job split into intra-node
// groups, as JoinHosts returns it. Every rank of the job holds the same
// Hosts, Groups and Excluded.
type HostGroups struct {
	// Rank and World are the global rank and job size.
	Rank, World int
	// Hosts[r] is the host of global rank r.
	Hosts []string
	// Groups lists every host group, ordered by their lowest rank.
	Groups []HostGroup
	// Group is this rank's group (an element of Groups).
	Group HostGroup
	// LocalRank is this rank's index in Group.Ranks.
	LocalRank int
	// Comm is this rank's intra-node comm, rendezvoused; nil when the rank
	// is excluded.
	Comm *Comm
	// Store is the group's view of the job's store (Group.Prefix); Comm
	// rendezvoused through it.
	Store *store.Prefixed
	// Excluded lists, by rank, every rank of the job that has no comm.
	// A group is all in or all out: when one of its ranks fails, every
	// rank of the group is excluded, naming the rank that failed.
	Excluded []*RankError
	// Err is why this rank is excluded, nil when it has a comm.
	Err error
	// Flat lists, per collective, the message sizes in bytes (of the
	// whole message, as nccl-tests count it) for which the collectives
	// across hosts take the inter-host engine across every rank instead
	// of the hierarchical path; a size in none of its collective's
	// windows, or a collective with none, goes hierarchical. JoinHosts sets
	// DefaultHostFlat(World) on CUDA, nil elsewhere. Every rank must hold the
	// same windows.
	Flat map[Op][]Window
	// NoCallCheck turns off the call check across hosts: by default,
	// before a collective's first step across hosts, the members of that
	// step all-gather a record of their calls on the inter-host engine,
	// and HostWork.Synchronize fails with ErrMismatch when they differ
	// (inside a host the Comm's kernels compare calls at no cost; the
	// engine compares none). It costs one small all-gather per call.
	// Every rank must hold the same value.
	NoCallCheck bool

	ih *interHost // collectives across hosts (interhost.go)
}

// LocalWorld is the size of this rank's group.
func (h *HostGroups) LocalWorld() int { return len(h.Group.Ranks) }

// AllJoined reports whether every rank of the job has an intra-node comm,
// which a hierarchical collective needs on every rank (see
// docs/MULTIHOST.md). Every rank gets the same answer.
func (h *HostGroups) AllJoined() bool { return len(h.Excluded) == 0 }

// InterNodeRanks returns the global ranks that hold this rank's local rank
// in every group, in group order (this rank included): the members of
// this rank's inter-node communicator when each group reduce-scatters
// inside the host and the matching slices are all-reduced across hosts.
// It needs groups of one size, and fails with an error matching
// backend.ErrInvalidArgument otherwise.
func (h *HostGroups) InterNodeRanks() ([]int, error) {
	out := make([]int, 0, len(h.Groups))
	for _, g := range h.Groups {
		if len(g.Ranks) != len(h.Group.Ranks) {
			return nil, backend.Errorf(backend.CodeInvalidArgument,
				"collective: host groups differ in size (%s has %d ranks, %s has %d): no inter-node rails",
				groupName(h.Group), len(h.Group.Ranks), groupName(g), len(g.Ranks))
		}
		out = append(out, g.Ranks[h.LocalRank])
	}
	return out, nil
}

// Close closes the comm and the group's store view; the job's store stays
// open. It does not wait for peers.
func (h *HostGroups) Close() error {
	errs := []error{h.closeInterHost()}
	errs = closing.Field(errs, &h.Comm)
	if h.Store != nil {
		errs = append(errs, h.Store.Close())
	}
	return errors.Join(errs...)
}

func groupName(g HostGroup) string {
	if g.Parts > 1 {
		return fmt.Sprintf("%q part %d", g.Host, g.Part)
	}
	return strconv.Quote(g.Host)
}

// JoinHosts forms the intra-node groups of a multi-host job. Every rank of
// the job calls it with its global rank, the job's size and the job's
// store (one that every host reaches, such as etcd). It all-gathers the
// ranks' host names (opts.Hostname, or the system's), splits the ranks by
// host, and rendezvouses one Comm per host through a view of st under
// "host/<name>/", with local rank = the rank's index among its host's
// ranks, and device = that index unless opts.Device says otherwise. Other
// options apply to the Comm as to New.
//
// A host with one rank cannot form a group (ErrWorldSize). A host with
// more than MaxDevices ranks is split into ceil(n/MaxDevices) groups of
// near-equal size, consecutive in rank order, with prefixes
// "host/<name>/part<k>/", since a comm spans at most MaxDevices devices.
// Any other refusal is the Comm's (ErrTopology, …).
//
// Refusals do not fail JoinHosts: the rank gets HostGroups with a nil Comm
// and Err saying why, and a final all-gather tells every rank which ranks
// of the job were excluded and why, so all ranks agree on whether the
// intra-node path can be used. JoinHosts fails only when that agreement
// cannot be reached (store errors, a rank that never arrives, bad
// arguments). ctx bounds the whole call (opts.Timeout if it has no
// deadline).
func JoinHosts(ctx context.Context, st store.Store, rank, world int, opts Options) (*HostGroups, error) {
	switch {
	case st == nil:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: host groups: nil store")
	case world < 1 || rank < 0 || rank >= world:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: host groups: rank %d out of range for world %d", rank, world)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	ctx, cancel := withDefaultTimeout(ctx, opts.Timeout)
	defer cancel()
	if opts.Hostname == "" {
		var err error
		if opts.Hostname, err = os.Hostname(); err != nil {
			return nil, backend.Wrap(backend.CodeUnavailable, err, "collective: host groups: host name")
		}
	}
	if opts.Hostname == "" || strings.Contains(opts.Hostname, "/") {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: host groups: bad host name %q", opts.Hostname)
	}
	// A per-rank counter names this call's exchange consistently on every
	// rank, so repeated calls on one store never share keys.
	n, err := st.Add(ctx, "intranode/hostgroups-counter/"+strconv.Itoa(rank), 1)
	if err != nil {
		return nil, fmt.Errorf("collective: host groups: counter: %w", err)
	}
	ex, err := store.NewExchange(st, fmt.Sprintf("HostGroups%d", n-1), rank, world)
	if err != nil {
		return nil, err
	}
	defer func() {
		// Only leaves the last round's keys behind; the groups are formed.
		if err := ex.Close(ctx); err != nil && opts.Logger != nil {
			opts.Logger.Warn("collective: host groups: closing the exchange", "rank", rank, "err", err)
		}
	}()
	raw, err := ex.AllGather(ctx, []byte(opts.Hostname))
	if err != nil {
		return nil, fmt.Errorf("collective: host groups: exchanging host names: %w", err)
	}
	hosts := make([]string, world)
	for r, b := range raw {
		hosts[r] = string(b)
	}
	groups, err := PlanHostGroups(hosts)
	if err != nil {
		return nil, err
	}
	h := &HostGroups{Rank: rank, World: world, Hosts: hosts, Groups: groups}
	hostIndex := 0
	for _, g := range groups {
		for i, r := range g.Ranks {
			if r == rank {
				h.Group, h.LocalRank = g, i
			}
		}
	}
	for r := 0; r < rank; r++ {
		if hosts[r] == hosts[rank] {
			hostIndex++
		}
	}
	h.Err = h.join(ctx, st, hostIndex, opts)
	h.ih = &interHost{job: st, b: opts.Backend, dev: hostIndex, timeout: opts.Timeout}
	h.ih.railRanks, _ = h.InterNodeRanks()
	h.ih.allRanks = make([]int, world)
	for r := range h.ih.allRanks {
		h.ih.allRanks[r] = r
	}
	if opts.Device != nil {
		h.ih.dev = *opts.Device
	}
	if h.Comm != nil {
		h.ih.b, h.ih.dev = h.Comm.b, h.Comm.Device().Index()
	}
	if h.ih.b != nil && h.ih.b.Name() == "cuda" {
		h.Flat = DefaultHostFlat(world)
	}

	if err := h.agree(ctx, ex); err != nil {
		_ = h.Close()
		return nil, err
	}
	return h, nil
}

// join rendezvouses this rank's comm; it returns why it could not.
func (h *HostGroups) join(ctx context.Context, st store.Store, hostIndex int, opts Options) error {
	g := h.Group
	if len(g.Ranks) < 2 {
		return fmt.Errorf("%w: rank %d is the only rank on host %q; an intra-node group needs 2 to %d",
			ErrWorldSize, h.Rank, g.Host, MaxDevices)
	}
	view, err := store.NewPrefixed(st, g.Prefix)
	if err != nil {
		return err
	}
	h.Store = view
	if opts.Device == nil {
		opts.Device = &hostIndex
	}
	c, err := New(view, h.LocalRank, len(g.Ranks), opts)
	if err != nil {
		return err
	}
	if err := c.Rendezvous(ctx); err != nil {
		_ = c.Close()
		return err
	}
	h.Comm = c
	return nil
}

// outcome is what each rank reports of its join in the final all-gather.
type outcome struct {
	OK      bool   `json:"ok"`
	Refusal int    `json:"refusal,omitempty"` // index+1 in refusals
	Code    int    `json:"code,omitempty"`    // backend.Code
	Msg     string `json:"msg,omitempty"`
}

func outcomeOf(err error) outcome {
	if err == nil {
		return outcome{OK: true}
	}
	o := outcome{Code: int(backend.CodeOf(err)), Msg: err.Error()}
	for i, r := range refusals {
		if errors.Is(err, r) {
			o.Refusal = i + 1
			break
		}
	}
	return o
}

// agree all-gathers every rank's outcome and fills Excluded. A rank whose
// group lost a member gives up its comm, so that groups are all in or all
// out.
func (h *HostGroups) agree(ctx context.Context, ex *store.Exchange) error {
	mine, _ := json.Marshal(outcomeOf(h.Err))
	all, err := ex.AllGather(ctx, mine)
	if err != nil {
		return fmt.Errorf("collective: host groups: reporting outcomes: %w", err)
	}
	outcomes := make([]outcome, len(all))
	for r, b := range all {
		if err := json.Unmarshal(b, &outcomes[r]); err != nil {
			return backend.Errorf(backend.CodeInvalidArgument, "collective: host groups: rank %d sent a malformed outcome: %v", r, err)
		}
	}
	reasons := make([]*RankError, len(outcomes))
	for r, o := range outcomes {
		if o.OK {
			continue
		}
		e := &RankError{Rank: r, Host: h.Hosts[r], Msg: o.Msg, code: backend.Code(o.Code)}
		if o.Refusal > 0 && o.Refusal <= len(refusals) {
			e.refusal = refusals[o.Refusal-1]
		}
		if r == h.Rank {
			e.err = h.Err
		}
		reasons[r] = e
	}
	for _, g := range h.Groups {
		var first *RankError
		for _, r := range g.Ranks {
			if reasons[r] != nil {
				first = reasons[r]
				break
			}
		}
		if first == nil {
			continue
		}
		for _, r := range g.Ranks {
			if reasons[r] == nil {
				reasons[r] = &RankError{Rank: r, Host: h.Hosts[r], refusal: first.refusal, code: first.code,
					Msg: fmt.Sprintf("rank %d of the group could not join: %s", first.Rank, first.Msg)}
			}
		}
	}
	for _, e := range reasons {
		if e != nil {
			h.Excluded = append(h.Excluded, e)
		}
	}
	if me := reasons[h.Rank]; me != nil {
		if h.Comm != nil {
			_ = h.Comm.Close()
			h.Comm = nil
		}
		h.Err = me
	}
	return nil
}

// PlanHostGroups splits the ranks of a job into host groups given each
// rank's host (hosts[r] for global rank r), as JoinHosts does: one group
// per host, ordered by lowest rank, and hosts with more than MaxDevices
// ranks split into ceil(n/MaxDevices) near-equal groups of consecutive
// ranks. Groups of one rank are listed too; they cannot form a comm.
func PlanHostGroups(hosts []string) ([]HostGroup, error) {
	var order []string
	byHost := map[string][]int{}
	for r, host := range hosts {
		if host == "" || strings.Contains(host, "/") {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: host groups: rank %d has bad host name %q", r, host)
		}
		if _, ok := byHost[host]; !ok {
			order = append(order, host)
		}
		byHost[host] = append(byHost[host], r)
	}
	var groups []HostGroup
	for _, host := range order {
		ranks := byHost[host]
		parts := (len(ranks) + MaxDevices - 1) / MaxDevices
		if parts == 1 {
			groups = append(groups, HostGroup{Host: host, Parts: 1, Ranks: ranks, Prefix: "host/" + host + "/"})
			continue
		}
		// Sizes differ by at most one: the first len%parts parts get the
		// extra rank.
		start := 0
		for k := range parts {
			size := len(ranks) / parts
			if k < len(ranks)%parts {
				size++
			}
			groups = append(groups, HostGroup{Host: host, Part: k, Parts: parts, Ranks: ranks[start : start+size : start+size],
				Prefix: fmt.Sprintf("host/%s/part%d/", host, k)})
			start += size
		}
	}
	return groups, nil
}
