package store

import (
	"context"
)

// Store is the key-value rendezvous service the ranks of a group share, as
// c10d's Store is for PyTorch. Keys are strings, values bytes.
//
// Every blocking method takes a context and returns an error matching
// backend.ErrTimeout (wrapping the context's error) when it ends first.
// Implementations apply their default timeout when ctx has no deadline, so
// no call can wait forever. Implementations are safe for concurrent use.
type Store interface {
	// Set stores value under key, replacing any previous value.
	Set(ctx context.Context, key string, value []byte) error
	// Get returns the value of key, waiting until it is set.
	Get(ctx context.Context, key string) ([]byte, error)
	// Wait blocks until every key is set.
	Wait(ctx context.Context, keys ...string) error
	// Add adds delta to the integer counter at key (missing counts as 0)
	// and returns the new value. Counters are stored as decimal text.
	Add(ctx context.Context, key string, delta int64) (int64, error)
	// CompareAndSet sets key to desired if its current value equals
	// expected (a missing key equals an empty expected) and returns the
	// value the key holds afterwards.
	CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error)
	// Check reports whether every key is set, without waiting.
	Check(ctx context.Context, keys ...string) (bool, error)
	// Delete removes key and reports whether it existed.
	Delete(ctx context.Context, key string) (bool, error)
	// Close releases the store's resources. Calls after Close fail with an
	// error matching backend.ErrClosed.
	Close() error
}
