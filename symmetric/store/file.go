//go:build unix

package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
)

// Polling bounds of File: readers cannot be woken across processes without
// a server, so they poll, starting fast for the common case of a key that
// is about to appear and backing off so long waits stay cheap.
const (
	filePollMin = 100 * time.Microsecond
	filePollMax = 10 * time.Millisecond
)

// maxEncodedName keeps file names well under the usual 255-byte limit;
// longer keys are named by their hash.
const maxEncodedName = 200

// fileLockName is the lock file in the store's directory. Data files start
// with "k" or "h" and temporary files with ".tmp", so none can collide.
const fileLockName = ".lock"

// File is a Store kept in a directory shared by the processes of one host,
// with no server. Each key is one file, written to a temporary file and
// renamed into place so readers see the old value or the new one, never a
// torn one. Writers serialise on an flock of a lock file (and a mutex, since
// an flock does not exclude goroutines sharing its descriptor), so Add and
// CompareAndSet are atomic across processes. Get and Wait poll with backoff.
//
// Several File values on one directory, in one process or many, are clients
// of the same store. Close releases this client only; the files stay.
type File struct {
	opts options
	dir  string

	mu       sync.Mutex // serialises this client's writers; guards lockFile
	lockFile *os.File
	done     chan struct{}
	once     sync.Once
}

var _ Store = (*File)(nil)

// ErrUnsafeDirectory matches (errors.Is) NewFile's refusal of a directory
// that another user owns or that others may write to: whoever can write
// there can plant or replace the keys of every job that meets through it.
var ErrUnsafeDirectory = errors.New("file store: unsafe directory")

// NewFile opens (creating it if needed, mode 0700) the store kept in dir. It
// refuses, with an error matching ErrUnsafeDirectory and
// backend.ErrInvalidArgument, a directory owned by another user or writable
// by its group or others. Keys and the lock file are opened without
// following symbolic links: a link planted in the directory is an error,
// never a path to another file. It honours WithTimeout and WithLogger.
func NewFile(dir string, opts ...Option) (*File, error) {
	if dir == "" {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "file store: empty directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, backend.Wrap(backend.CodeUnavailable, err, "file store: create directory")
	}
	if err := checkPrivateDir(dir); err != nil {
		return nil, err
	}
	lf, err := openNoFollow(filepath.Join(dir, fileLockName), os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, backend.Wrap(backend.CodeUnavailable, err, "file store: open lock file")
	}
	return &File{opts: buildOptions(opts), dir: dir, lockFile: lf, done: make(chan struct{})}, nil
}

// checkPrivateDir refuses a directory this process's user does not own, or
// that its group or others may write to.
func checkPrivateDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return backend.Wrap(backend.CodeUnavailable, err, "file store: stat directory")
	}
	mode := fs.FileMode(st.Mode & 0o777)
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return backend.Errorf(backend.CodeInvalidArgument, "file store: %s is not a directory", dir)
	case int(st.Uid) != os.Geteuid():
		return backend.Wrap(backend.CodeInvalidArgument, ErrUnsafeDirectory,
			fmt.Sprintf("file store: %s is owned by uid %d, not by this process's uid %d", dir, st.Uid, os.Geteuid()))
	case mode&0o022 != 0:
		return backend.Wrap(backend.CodeInvalidArgument, ErrUnsafeDirectory,
			fmt.Sprintf("file store: %s has mode %v: its group or others may write to it (chmod go-w, or use a new directory)", dir, mode))
	}
	return nil
}

// openNoFollow opens path without following a symbolic link in its last
// element and without blocking on a FIFO, and checks that what it opened
// is a regular file.
func openNoFollow(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link; the store does not follow links: %w", path, err)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is a %v, not a regular file", path, fi.Mode().Type())
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// readNoFollow reads the regular file at path (see openNoFollow).
func readNoFollow(path string) ([]byte, error) {
	f, err := openNoFollow(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Dir returns the store's directory.
func (f *File) Dir() string { return f.dir }

// path names key's file. base64url keeps any byte string a single safe
// path element; keys too long for that are named by their SHA-256.
func (f *File) path(key string) string {
	name := "k" + base64.RawURLEncoding.EncodeToString([]byte(key))
	if len(name) > maxEncodedName {
		sum := sha256.Sum256([]byte(key))
		name = "h" + hex.EncodeToString(sum[:])
	}
	return filepath.Join(f.dir, name)
}

func (f *File) isClosed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

func (f *File) closedError(op, key string) error {
	return backend.Errorf(backend.CodeClosed, "file store %s %q: store is closed", op, key)
}

// read returns key's value; ok is false when the key is not set.
func (f *File) read(op, key string) (value []byte, ok bool, err error) {
	v, err := readNoFollow(f.path(key))
	switch {
	case err == nil:
		return v, true, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	default:
		return nil, false, backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("file store %s %q", op, key))
	}
}

// write replaces key's value atomically: readers see the old file or the
// new one. The caller holds the lock.
func (f *File) write(op, key string, value []byte) error {
	tmp, err := os.CreateTemp(f.dir, ".tmp-*")
	if err != nil {
		return backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("file store %s %q", op, key))
	}
	_, werr := tmp.Write(value)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("file store %s %q", op, key))
	}
	if err := os.Rename(tmp.Name(), f.path(key)); err != nil {
		_ = os.Remove(tmp.Name())
		return backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("file store %s %q", op, key))
	}
	return nil
}

// poll calls try with growing pauses until it reports done, the store
// closes or ctx ends.
func (f *File) poll(ctx context.Context, op, key string, try func() (bool, error)) error {
	ctx, cancel := withDeadline(ctx, f.opts.timeout)
	defer cancel()
	pause := filePollMin
	timer := time.NewTimer(pause)
	defer timer.Stop()
	for {
		if f.isClosed() {
			return f.closedError(op, key)
		}
		done, err := try()
		if done || err != nil {
			return err
		}
		timer.Reset(pause)
		select {
		case <-timer.C:
		case <-f.done:
			return f.closedError(op, key)
		case <-ctx.Done():
			return timeoutError(ctx, fmt.Sprintf("file store %s %q", op, key))
		}
		pause = min(2*pause, filePollMax)
	}
}

// locked runs fn holding the store-wide lock: the client's mutex, then the
// flock. The flock is taken without blocking and retried so that waiting
// for it honours ctx and Close.
func (f *File) locked(ctx context.Context, op, key string, fn func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.isClosed() {
		return f.closedError(op, key)
	}
	fd := int(f.lockFile.Fd())
	err := f.poll(ctx, op+" (lock)", key, func() (bool, error) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK), errors.Is(err, unix.EINTR):
			return false, nil
		default:
			return false, backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("file store %s %q: flock", op, key))
		}
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := unix.Flock(fd, unix.LOCK_UN); err != nil {
			f.opts.logger.Warn("file store: unlock failed", "dir", f.dir, "err", err)
		}
	}()
	return fn()
}

// Set stores value under key.
func (f *File) Set(ctx context.Context, key string, value []byte) error {
	return f.locked(ctx, "set", key, func() error { return f.write("set", key, value) })
}

// Get returns key's value, polling until it is set.
func (f *File) Get(ctx context.Context, key string) ([]byte, error) {
	var value []byte
	err := f.poll(ctx, "get", key, func() (bool, error) {
		v, ok, err := f.read("get", key)
		value = v
		return ok, err
	})
	if err != nil {
		return nil, err
	}
	return value, nil
}

// Wait polls until every key is set.
func (f *File) Wait(ctx context.Context, keys ...string) error {
	ctx, cancel := withDeadline(ctx, f.opts.timeout)
	defer cancel()
	for _, key := range keys {
		err := f.poll(ctx, "wait", key, func() (bool, error) { return f.exists("wait", key) })
		if err != nil {
			return err
		}
	}
	if f.isClosed() {
		return f.closedError("wait", "")
	}
	return nil
}

func (f *File) exists(op, key string) (bool, error) {
	_, err := os.Lstat(f.path(key))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("file store %s %q", op, key))
	}
}

// Add adds delta to the decimal counter at key, atomically across processes.
func (f *File) Add(ctx context.Context, key string, delta int64) (int64, error) {
	var n int64
	err := f.locked(ctx, "add", key, func() error {
		old, ok, err := f.read("add", key)
		if err != nil {
			return err
		}
		if n, err = AddCounter(key, old, ok, delta); err != nil {
			return err
		}
		return f.write("add", key, strconv.AppendInt(nil, n, 10))
	})
	return n, err
}

// CompareAndSet sets key to desired if it holds expected (missing equals an
// empty expected), atomically across processes, and returns the value it
// holds afterwards.
func (f *File) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	var result []byte
	err := f.locked(ctx, "compare-and-set", key, func() error {
		old, ok, err := f.read("compare-and-set", key)
		if err != nil {
			return err
		}
		if (ok && bytes.Equal(old, expected)) || (!ok && len(expected) == 0) {
			result = cloneBytes(desired)
			return f.write("compare-and-set", key, desired)
		}
		result = cloneBytes(old)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

// Check reports whether every key is set.
func (f *File) Check(ctx context.Context, keys ...string) (bool, error) {
	if f.isClosed() {
		return false, f.closedError("check", "")
	}
	for _, k := range keys {
		if ok, err := f.exists("check", k); !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

// Delete removes key and reports whether it existed.
func (f *File) Delete(ctx context.Context, key string) (bool, error) {
	var existed bool
	err := f.locked(ctx, "delete", key, func() error {
		err := os.Remove(f.path(key))
		switch {
		case err == nil:
			existed = true
			return nil
		case errors.Is(err, fs.ErrNotExist):
			return nil
		default:
			return backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("file store delete %q", key))
		}
	})
	return existed, err
}

// Close releases this client: pending and later calls fail with an error
// matching backend.ErrClosed. The directory and its keys stay for the other
// clients. Closing twice is harmless.
func (f *File) Close() error {
	var err error
	f.once.Do(func() {
		close(f.done)
		f.mu.Lock()
		defer f.mu.Unlock()
		if cerr := f.lockFile.Close(); cerr != nil {
			err = backend.Wrap(backend.CodeInternal, cerr, "file store: close lock file")
		}
	})
	return err
}
