package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

// DefaultTTL is the lease TTL of a client whose Config sets none: how long
// after a rank dies its keys disappear.
const DefaultTTL = 10 * time.Second

// Config says where the store is and how this client joins it.
type Config struct {
	// Endpoints are the etcd servers, as host:port or URLs
	// (https://host:port when TLS is set).
	Endpoints []string
	// Prefix is the job's key prefix, e.g. "/intranode/job-42"; required.
	// Give every job its own: keys of an earlier job under the same
	// prefix would be read as this job's until their leases expire.
	Prefix string
	// TTL is this client's lease TTL (DefaultTTL if 0), rounded up to a
	// whole second. etcd raises TTLs below its minimum (about 2 s with
	// default raft timing); TTL reports the one granted.
	TTL time.Duration
	// Member names this client among the job's members ("rank3"); by
	// default its lease ID in hex. Two live clients cannot share a name.
	Member string
	// TLS, if set, is used for the connection: server verification and
	// client certificates.
	TLS *tls.Config
	// Username and Password authenticate with etcd's auth, if Username is
	// set.
	Username, Password string
}

// Store is a store.Store in etcd; see the package documentation. It is
// safe for concurrent use.
type Store struct {
	cli     *clientv3.Client
	prefix  string // the job's, ending in "/"
	keys    string // prefix + "k/"
	members string // prefix + "m/"
	member  string
	lease   clientv3.LeaseID
	ttl     time.Duration
	opts    store.Settings

	life      context.Context // ends at Close or when the lease is lost
	end       context.CancelCauseFunc
	kaDone    chan struct{} // closed when the keep-alive loop returns
	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// New connects to etcd, grants this client's lease, starts keeping it
// alive and registers the member. ctx bounds all of that (the store's
// timeout, WithTimeout, if ctx has no deadline). It honours WithTimeout and
// WithLogger.
func New(ctx context.Context, cfg Config, opts ...store.Option) (*Store, error) {
	o := store.Resolve(opts...)
	prefix := strings.TrimRight(cfg.Prefix, "/")
	switch {
	case len(cfg.Endpoints) == 0:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "etcd store: no endpoints")
	case prefix == "":
		return nil, backend.Errorf(backend.CodeInvalidArgument, "etcd store: empty prefix %q; give every job its own", cfg.Prefix)
	case cfg.TTL < 0:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "etcd store: negative TTL %v", cfg.TTL)
	case strings.Contains(cfg.Member, "/"):
		return nil, backend.Errorf(backend.CodeInvalidArgument, "etcd store: member name %q contains '/'", cfg.Member)
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints,
		TLS:       cfg.TLS,
		Username:  cfg.Username,
		Password:  cfg.Password,
		Logger:    zap.NewNop(),
		// Keep dead connections from hiding behind TCP's long timeouts.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		// Values up to etcd's own request limit, and room for the
		// protocol around them.
		MaxCallSendMsgSize: 4 << 20,
	})
	if err != nil {
		return nil, classify(ctx, err, fmt.Sprintf("etcd store: connect to %s", strings.Join(cfg.Endpoints, ",")))
	}
	life, end := context.WithCancelCause(context.Background())
	s := &Store{
		cli:     cli,
		prefix:  prefix + "/",
		keys:    prefix + "/k/",
		members: prefix + "/m/",
		opts:    o,
		life:    life,
		end:     end,
		kaDone:  make(chan struct{}),
	}
	if err := s.join(ctx, ttl, cfg.Member); err != nil {
		end(err)
		_ = cli.Close()
		return nil, err
	}
	return s, nil
}

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

// Prefix returns the job's prefix, ending in "/".
func (s *Store) Prefix() string { return s.prefix }

// Member returns this client's member name.
func (s *Store) Member() string { return s.member }

// Lease returns this client's lease ID.
func (s *Store) Lease() int64 { return int64(s.lease) }

// TTL returns the TTL etcd granted this client's lease.
func (s *Store) TTL() time.Duration { return s.ttl }

func (s *Store) key(k string) string { return s.keys + k }

// begin checks that the store is usable and returns ctx bounded by the
// store's timeout and ended also by Close or a lost lease.
func (s *Store) begin(ctx context.Context, op, key string) (context.Context, context.CancelFunc, error) {
	if s.life.Err() != nil {
		return nil, nil, s.ended(op, key)
	}
	var cancel context.CancelFunc
	if _, ok := ctx.Deadline(); ok {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
	}
	stop := context.AfterFunc(s.life, cancel)
	return ctx, func() { stop(); cancel() }, nil
}

// ended is the error of a call made after Close or a lost lease.
func (s *Store) ended(op, key string) error {
	cause := context.Cause(s.life)
	return backend.Wrap(backend.CodeOf(cause), cause, fmt.Sprintf("etcd store %s %q", op, key))
}

// fail turns the error of an etcd call into one with a backend code.
func (s *Store) fail(ctx context.Context, err error, op, key string) error {
	if s.life.Err() != nil {
		return s.ended(op, key)
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		lost := backend.Errorf(backend.CodePeerFailed,
			"etcd store: lease %x of member %q expired: its keys are gone and its peers consider it gone", int64(s.lease), s.member)
		s.end(lost)
		return s.ended(op, key)
	}
	return classify(ctx, err, fmt.Sprintf("etcd store %s %q", op, key))
}

// classify gives err a backend code: a timeout when ctx ended, otherwise
// by the gRPC status etcd answered with.
func classify(ctx context.Context, err error, msg string) error {
	if ctx.Err() != nil {
		cause := ctx.Err()
		return backend.Wrap(backend.CodeTimeout, fmt.Errorf("%w (%w)", cause, err), msg)
	}
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else {
		code = status.Code(err)
	}
	switch {
	case errors.Is(err, rpctypes.ErrNoSpace):
		return backend.Wrap(backend.CodeOutOfMemory, err, msg)
	case code == codes.InvalidArgument, code == codes.PermissionDenied, code == codes.Unauthenticated,
		code == codes.OutOfRange, code == codes.FailedPrecondition:
		return backend.Wrap(backend.CodeInvalidArgument, err, msg)
	case code == codes.DeadlineExceeded, code == codes.Canceled:
		return backend.Wrap(backend.CodeTimeout, err, msg)
	}
	return backend.Wrap(backend.CodeUnavailable, err, msg)
}

// Set stores value under key, attached to this client's lease.
func (s *Store) Set(ctx context.Context, key string, value []byte) error {
	ctx, done, err := s.begin(ctx, "set", key)
	if err != nil {
		return err
	}
	defer done()
	if _, err := s.cli.Put(ctx, s.key(key), string(value), clientv3.WithLease(s.lease)); err != nil {
		return s.fail(ctx, err, "set", key)
	}
	return nil
}

// Get returns key's value, watching for it until it is set.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, done, err := s.begin(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.await(ctx, "get", s.key(key), key, true)
}

// await returns once etcd key k is present (the value it was set to) or,
// if present is false, absent. It reads k and, if that does not settle
// it, watches k from the revision after the read, so that no change in
// between is missed; a watch that ends without settling it (a compaction,
// a lost leader) starts over with a new read.
func (s *Store) await(ctx context.Context, op, k, key string, present bool) ([]byte, error) {
	for {
		resp, err := s.cli.Get(ctx, k)
		if err != nil {
			return nil, s.fail(ctx, err, op, key)
		}
		if (len(resp.Kvs) > 0) == present {
			if present {
				return clone(resp.Kvs[0].Value), nil
			}
			return nil, nil
		}
		v, ok, err := s.watch(ctx, op, k, key, resp.Header.Revision+1, present)
		if err != nil || ok {
			return v, err
		}
	}
}

// watch waits, from revision rev on, for a put of k (present) or a delete
// of it; ok is false when the watch ended without one and must be retried.
func (s *Store) watch(ctx context.Context, op, k, key string, rev int64, present bool) (v []byte, ok bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.cli.Watch(wctx, k, clientv3.WithRev(rev)) {
		if werr := wr.Err(); werr != nil {
			if wr.CompactRevision != 0 {
				// The revisions we asked for are gone; read again.
				return nil, false, nil
			}
			if ctx.Err() != nil || s.life.Err() != nil {
				break
			}
			if errors.Is(werr, rpctypes.ErrNoLeader) {
				s.opts.Logger.Debug("etcd store: watch lost its leader; retrying", "key", key)
				return nil, false, nil
			}
			return nil, false, s.fail(ctx, werr, op, key)
		}
		for _, ev := range wr.Events {
			if present && ev.Type == clientv3.EventTypePut {
				return clone(ev.Kv.Value), true, nil
			}
			if !present && ev.Type == clientv3.EventTypeDelete {
				return nil, true, nil
			}
		}
	}
	if s.life.Err() != nil {
		return nil, false, s.ended(op, key)
	}
	if ctx.Err() != nil {
		return nil, false, backend.Wrap(backend.CodeTimeout, ctx.Err(), fmt.Sprintf("etcd store %s %q", op, key))
	}
	return nil, false, backend.Errorf(backend.CodeUnavailable, "etcd store %s %q: watch ended", op, key)
}

// Wait blocks until every key is set at once.
func (s *Store) Wait(ctx context.Context, keys ...string) error {
	ctx, done, err := s.begin(ctx, "wait", firstKey(keys))
	if err != nil {
		return err
	}
	defer done()
	for {
		missing, err := s.firstMissing(ctx, "wait", keys)
		if err != nil || missing < 0 {
			return err
		}
		if _, err := s.await(ctx, "wait", s.key(keys[missing]), keys[missing], true); err != nil {
			return err
		}
	}
}

// txnOps bounds the operations of one transaction, under etcd's default
// limit of 128.
const txnOps = 64

// firstMissing returns the index of the first unset key, -1 if all are set.
// Each batch of keys is read at one revision.
func (s *Store) firstMissing(ctx context.Context, op string, keys []string) (int, error) {
	for start := 0; start < len(keys); start += txnOps {
		batch := keys[start:min(start+txnOps, len(keys))]
		ops := make([]clientv3.Op, len(batch))
		for i, k := range batch {
			ops[i] = clientv3.OpGet(s.key(k), clientv3.WithCountOnly())
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return 0, s.fail(ctx, err, op, batch[0])
		}
		for i, r := range resp.Responses {
			if r.GetResponseRange().Count == 0 {
				return start + i, nil
			}
		}
	}
	return -1, nil
}

// Check reports whether every key is set.
func (s *Store) Check(ctx context.Context, keys ...string) (bool, error) {
	ctx, done, err := s.begin(ctx, "check", firstKey(keys))
	if err != nil {
		return false, err
	}
	defer done()
	missing, err := s.firstMissing(ctx, "check", keys)
	return err == nil && missing < 0, err
}

// Add adds delta to the decimal counter at key in a transaction that
// succeeds only if the key is unchanged since it was read, retrying
// otherwise.
func (s *Store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	ctx, done, err := s.begin(ctx, "add", key)
	if err != nil {
		return 0, err
	}
	defer done()
	k := s.key(key)
	resp, err := s.cli.Get(ctx, k)
	if err != nil {
		return 0, s.fail(ctx, err, "add", key)
	}
	kvs := resp.Kvs
	for {
		var old []byte
		var rev int64 // 0: the key is missing, which ModRevision compares as
		if len(kvs) > 0 {
			old, rev = kvs[0].Value, kvs[0].ModRevision
		}
		n, err := addCounter(key, old, len(kvs) > 0, delta)
		if err != nil {
			return 0, err
		}
		tr, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).
			Then(clientv3.OpPut(k, strconv.FormatInt(n, 10), clientv3.WithLease(s.lease))).
			Else(clientv3.OpGet(k)).
			Commit()
		if err != nil {
			return 0, s.fail(ctx, err, "add", key)
		}
		if tr.Succeeded {
			return n, nil
		}
		kvs = tr.Responses[0].GetResponseRange().Kvs
	}
}

// addCounter parses old as a decimal counter (missing counts as 0) and adds
// delta, refusing overflow.
func addCounter(key string, old []byte, ok bool, delta int64) (int64, error) {
	var cur int64
	if ok {
		v, err := strconv.ParseInt(string(old), 10, 64)
		if err != nil {
			return 0, backend.Wrap(backend.CodeInvalidArgument, err,
				fmt.Sprintf("etcd store add %q: value is not a decimal counter", key))
		}
		cur = v
	}
	if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "etcd store add %q: %d%+d overflows int64", key, cur, delta)
	}
	return cur + delta, nil
}

// CompareAndSet sets key to desired if it holds expected (a missing key
// equals an empty expected), in a transaction, and returns the value the
// key holds afterwards.
func (s *Store) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	ctx, done, err := s.begin(ctx, "compare-and-set", key)
	if err != nil {
		return nil, err
	}
	defer done()
	k := s.key(key)
	put := clientv3.OpPut(k, string(desired), clientv3.WithLease(s.lease))
	for {
		if len(expected) == 0 {
			// etcd cannot compare a missing key's value, so "missing"
			// is its own comparison; an existing empty value is tried
			// below.
			tr, err := s.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(put).Else(clientv3.OpGet(k)).Commit()
			if err != nil {
				return nil, s.fail(ctx, err, "compare-and-set", key)
			}
			if tr.Succeeded {
				return clone(desired), nil
			}
			kvs := tr.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue // deleted since: try again
			}
			if len(kvs[0].Value) != 0 {
				return clone(kvs[0].Value), nil
			}
		}
		tr, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(k), "=", string(expected))).Then(put).Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return nil, s.fail(ctx, err, "compare-and-set", key)
		}
		if tr.Succeeded {
			return clone(desired), nil
		}
		kvs := tr.Responses[0].GetResponseRange().Kvs
		switch {
		case len(kvs) > 0:
			return clone(kvs[0].Value), nil
		case len(expected) == 0:
			continue // the empty value was deleted since: try again
		}
		return []byte{}, nil
	}
}

// Delete removes key and reports whether it existed.
func (s *Store) Delete(ctx context.Context, key string) (bool, error) {
	ctx, done, err := s.begin(ctx, "delete", key)
	if err != nil {
		return false, err
	}
	defer done()
	resp, err := s.cli.Delete(ctx, s.key(key))
	if err != nil {
		return false, s.fail(ctx, err, "delete", key)
	}
	return resp.Deleted > 0, nil
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

// Close stops renewing the lease and closes the connection; pending and
// later calls fail with an error matching backend.ErrClosed. The lease is
// not revoked: the client's keys stay readable for one TTL, for peers
// still reading its last values, and then go. Closing twice is harmless.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.end(backend.Errorf(backend.CodeClosed, "etcd store: member %q of %s is closed", s.member, s.prefix))
		if cerr := s.cli.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = backend.Wrap(backend.CodeUnavailable, cerr, "etcd store: close")
		}
		<-s.kaDone
	})
	return err
}

func clone(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}

func firstKey(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
