package etcdstore

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/intranode/intranode/backend"
)

// join grants the lease, starts keeping it alive and registers the member.
func (s *Store) join(ctx context.Context, ttl time.Duration, member string) error {
	secs := int64(math.Ceil(ttl.Seconds()))
	grant, err := s.cli.Grant(ctx, secs)
	if err != nil {
		return classify(ctx, err, "etcd store: grant lease")
	}
	s.lease, s.ttl = grant.ID, time.Duration(grant.TTL)*time.Second
	revoke := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_, _ = s.cli.Revoke(rctx, s.lease)
	}
	ka, err := s.cli.KeepAlive(s.life, s.lease)
	if err != nil {
		revoke()
		return classify(ctx, err, "etcd store: keep lease alive")
	}
	go s.keepAlive(ka)
	if member == "" {
		member = strconv.FormatInt(int64(s.lease), 16)
	}
	s.member = member
	host, _ := os.Hostname()
	info := fmt.Sprintf("host %s pid %d lease %x", host, os.Getpid(), int64(s.lease))
	k := s.members + member
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, info, clientv3.WithLease(s.lease))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		revoke()
		return classify(ctx, err, fmt.Sprintf("etcd store: register member %q", member))
	}
	if !resp.Succeeded {
		revoke()
		holder := ""
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			holder = " (" + string(kvs[0].Value) + ")"
		}
		return backend.Errorf(backend.CodeInvalidArgument,
			"etcd store: member %q of %s is already live%s; each rank needs its own name", member, s.prefix, holder)
	}
	s.opts.Logger.Debug("etcd store: joined", "prefix", s.prefix, "member", member, "lease", fmt.Sprintf("%x", int64(s.lease)), "ttl", s.ttl)
	return nil
}

// keepAlive drains the lease's keep-alive responses. The channel closes
// when the store closes or when the lease cannot be renewed; in the second
// case the client's keys are gone and every call fails from then on.
func (s *Store) keepAlive(ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(s.kaDone)
	for range ka {
	}
	if s.life.Err() == nil {
		err := backend.Errorf(backend.CodePeerFailed,
			"etcd store: lease %x of member %q lost: its keys expired and its peers consider it gone", int64(s.lease), s.member)
		s.opts.Logger.Warn("etcd store: lease lost", "prefix", s.prefix, "member", s.member, "err", err)
		s.end(err)
	}
}

// Members lists the names of the job's live members, sorted: the clients
// whose leases have not expired.
func (s *Store) Members(ctx context.Context) ([]string, error) {
	ctx, done, err := s.begin(ctx, "members", "")
	if err != nil {
		return nil, err
	}
	defer done()
	resp, err := s.cli.Get(ctx, s.members, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, s.fail(ctx, err, "members", "")
	}
	names := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		names[i] = strings.TrimPrefix(string(kv.Key), s.members)
	}
	sort.Strings(names)
	return names, nil
}

// WaitGone blocks until member is not live: it closed more than a TTL ago,
// or died and its lease expired (at most a TTL after its last renewal),
// taking its keys with it. It returns at once for a member that is not
// live.
func (s *Store) WaitGone(ctx context.Context, member string) error {
	ctx, done, err := s.begin(ctx, "wait-gone", member)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.await(ctx, "wait-gone", s.members+member, member, false)
	return err
}
