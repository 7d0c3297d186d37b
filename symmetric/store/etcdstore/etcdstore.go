package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

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
	// default its lease ID in hex. Two live clients cannot share a name,
	// so a rank restarted within a TTL of its predecessor's end finds its
	// name taken until that lease lapses.
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
	cli, err := connect(ctx, clientv3.Config{
		Endpoints: cfg.Endpoints,
		TLS:       cfg.TLS,
		Username:  cfg.Username,
		Password:  cfg.Password,
		Logger:    zap.NewNop(),
		// Keep dead connections from hiding behind TCP's long timeouts.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		// Let the server's request limit (--max-request-bytes), not the
		// client's 2 MiB default, bound values.
		MaxCallSendMsgSize: 4 << 20,
	})
	if err != nil {
		return nil, err
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

// connect creates the etcd client within ctx. clientv3.New blocks, when
// authenticating, for as long as its DialTimeout allows, and honours no
// context; so it gets ctx's remaining time and runs aside, and a client
// that arrives after ctx ended is closed.
func connect(ctx context.Context, cfg clientv3.Config) (*clientv3.Client, error) {
	deadline, _ := ctx.Deadline()
	cfg.DialTimeout = max(time.Until(deadline), time.Millisecond)
	type result struct {
		cli *clientv3.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		cli, err := clientv3.New(cfg)
		done <- result{cli, err}
	}()
	what := "etcd store: connect to " + strings.Join(cfg.Endpoints, ",")
	select {
	case r := <-done:
		if r.err != nil {
			return nil, classify(ctx, r.err, what)
		}
		return r.cli, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.cli != nil {
				_ = r.cli.Close()
			}
		}()
		return nil, backend.Wrap(backend.CodeTimeout, ctx.Err(), what)
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
		n, err := store.AddCounter(key, old, len(kvs) > 0, delta)
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
