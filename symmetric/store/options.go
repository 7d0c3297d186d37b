package store

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/intranode/intranode/backend"
)

// Defaults applied when no Option overrides them.
const (
	// DefaultTimeout bounds every blocking call whose context has no
	// deadline.
	DefaultTimeout = 5 * time.Minute
	// DefaultMaxFrameSize is the largest TCP frame either side accepts.
	DefaultMaxFrameSize = 16 << 20
	// DefaultMaxKeys is the most keys an in-process or TCP store holds.
	DefaultMaxKeys = 1 << 20
	// DefaultMaxInflight is the most requests one TCP connection may have
	// outstanding at once.
	DefaultMaxInflight = 128
	// DefaultHelloTimeout is how long a new TCP connection may take to
	// say hello (and authenticate) before the server closes it.
	DefaultHelloTimeout = 5 * time.Second
	// DefaultMaxPending is the most TCP connections still in their hello
	// that a server keeps, in all and from one address
	// (DefaultMaxPendingPerAddr); past either, the oldest is closed.
	DefaultMaxPending        = 256
	DefaultMaxPendingPerAddr = 64
	// DefaultMaxConns is the most TCP connections past their hello a
	// server serves at once; more are refused with an error frame.
	DefaultMaxConns = 4096
)

// Option configures a store, a TCP server or an Exchange. Options that do
// not apply to the thing being built are ignored.
type Option func(*options)

type options struct {
	timeout      time.Duration
	logger       *slog.Logger
	maxFrameSize int
	maxKeys      int
	maxInflight  int
	admission    Admission
	secret       []byte // see WithSecret and authSecret
	secretSet    bool
}

func buildOptions(opts []Option) options {
	o := options{
		timeout:      DefaultTimeout,
		logger:       slog.New(slog.DiscardHandler),
		maxFrameSize: DefaultMaxFrameSize,
		maxKeys:      DefaultMaxKeys,
		maxInflight:  DefaultMaxInflight,
		admission: Admission{HelloTimeout: DefaultHelloTimeout, MaxPending: DefaultMaxPending,
			MaxPendingPerAddr: DefaultMaxPendingPerAddr, MaxConns: DefaultMaxConns},
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// WithTimeout sets the deadline applied to blocking calls whose context has
// none (DefaultTimeout if unset). Non-positive values are ignored.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithLogger sets the logger for diagnostics. Stores are quiet by default.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithMaxFrameSize bounds the size of one TCP frame, in bytes, on the server
// and the client (DefaultMaxFrameSize if unset). A frame declaring more is
// refused before any memory is allocated for it. Values below 64 are ignored.
func WithMaxFrameSize(n int) Option {
	return func(o *options) {
		if n >= 64 {
			o.maxFrameSize = n
		}
	}
}

// WithMaxKeys bounds how many keys an in-process store or a TCP server holds
// (DefaultMaxKeys if unset); writing a new key beyond it fails with an error
// matching backend.ErrOutOfMemory. Non-positive values are ignored.
func WithMaxKeys(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxKeys = n
		}
	}
}

// WithMaxInflight bounds how many requests one TCP connection may have
// outstanding (DefaultMaxInflight if unset). The client waits for a free
// slot; the server refuses requests beyond it with an error matching
// backend.ErrUnavailable. Non-positive values are ignored.
func WithMaxInflight(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxInflight = n
		}
	}
}

// Admission is how a TCP server admits connections. A connection is
// pending from accept until its hello (and, with a secret, its proof) is
// in; pending connections are few and short-lived, so a flood of silent or
// garbage connections evicts the oldest of them instead of shutting out the
// ranks of the job, whose hello takes a round trip.
type Admission struct {
	// HelloTimeout: a pending connection is closed after this long.
	HelloTimeout time.Duration
	// MaxPending and MaxPendingPerAddr bound the pending connections in
	// all and from one remote address; a new one past either bound evicts
	// the oldest pending one (of that address, or of all).
	MaxPending, MaxPendingPerAddr int
	// MaxConns bounds the connections past their hello; one more is
	// refused with an error frame matching backend.ErrUnavailable.
	MaxConns int
}

// WithAdmission sets how a TCP server admits connections; fields that are
// not positive keep their defaults (DefaultHelloTimeout, DefaultMaxPending,
// DefaultMaxPendingPerAddr, DefaultMaxConns).
func WithAdmission(a Admission) Option {
	return func(o *options) {
		if a.HelloTimeout > 0 {
			o.admission.HelloTimeout = a.HelloTimeout
		}
		if a.MaxPending > 0 {
			o.admission.MaxPending = a.MaxPending
		}
		if a.MaxPendingPerAddr > 0 {
			o.admission.MaxPendingPerAddr = a.MaxPendingPerAddr
		}
		if a.MaxConns > 0 {
			o.admission.MaxConns = a.MaxConns
		}
	}
}

// withDeadline gives ctx the default timeout when it has no deadline, so no
// blocking call can wait forever.
func withDeadline(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// timeoutError reports that ctx ended before op did. Cancellation counts as a
// timeout too: the Store contract has one code for "the caller stopped
// waiting", and the wrapped context error tells the two apart.
func timeoutError(ctx context.Context, op string) error {
	err := ctx.Err()
	if err == nil {
		err = context.DeadlineExceeded
	}
	return backend.Wrap(backend.CodeTimeout, err, op)
}

// AddCounter is Store.Add's arithmetic, for Store implementations: it
// parses old (present when ok) as a decimal counter, a missing one
// counting as 0, and adds delta, refusing a value that is not a counter
// and overflow with backend.ErrInvalidArgument.
func AddCounter(key string, old []byte, ok bool, delta int64) (int64, error) {
	var cur int64
	if ok {
		v, err := strconv.ParseInt(string(old), 10, 64)
		if err != nil {
			return 0, backend.Wrap(backend.CodeInvalidArgument, err,
				fmt.Sprintf("store add %q: value is not a decimal counter", key))
		}
		cur = v
	}
	if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "store add %q: %d%+d overflows int64", key, cur, delta)
	}
	return cur + delta, nil
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return append(make([]byte, 0, len(b)), b...)
}
