package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intranode/intranode/backend"
)

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
	case errors.Is(err, rpctypes.ErrTooManyRequests):
		return backend.Wrap(backend.CodeUnavailable, err, msg)
	case code == codes.ResourceExhausted:
		// A request over gRPC's message limit, which sits above etcd's
		// own request limit.
		return backend.Wrap(backend.CodeInvalidArgument, err, msg)
	case code == codes.InvalidArgument, code == codes.PermissionDenied, code == codes.Unauthenticated,
		code == codes.OutOfRange, code == codes.FailedPrecondition:
		return backend.Wrap(backend.CodeInvalidArgument, err, msg)
	case code == codes.DeadlineExceeded, code == codes.Canceled:
		return backend.Wrap(backend.CodeTimeout, err, msg)
	}
	return backend.Wrap(backend.CodeUnavailable, err, msg)
}
