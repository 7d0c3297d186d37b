package store

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
)

// OpenFunc opens a store for a URL of the scheme it was registered for. It
// receives the URL already parsed and the options given to Open; it honours
// at least WithTimeout (bounding the open when ctx has no deadline, and
// every later call) and WithLogger, which Resolve reads.
type OpenFunc func(ctx context.Context, u *url.URL, opts ...Option) (Store, error)

// builtinSchemes are handled by Open itself and cannot be registered.
var builtinSchemes = map[string]bool{"mem": true, "file": true, "tcp": true}

// The registries of this file: schemes registered by store packages that
// this one must not import (etcd), and the process-local named stores of
// mem:// URLs.
var (
	schemesMu sync.RWMutex
	schemes   = map[string]OpenFunc{}

	memStoresMu sync.Mutex
	memStores   = map[string]*memShared{}
)

// RegisterScheme makes Open handle URLs of scheme (lower case, e.g. "etcd")
// with open. Store packages call it from an init function, so that a
// program links a store's dependencies only if it imports that package
// (as database/sql drivers register themselves). It panics if open is nil,
// the scheme is empty or built in (mem, file, tcp), or it is registered
// twice.
func RegisterScheme(scheme string, open OpenFunc) {
	scheme = strings.ToLower(scheme)
	schemesMu.Lock()
	defer schemesMu.Unlock()
	switch {
	case open == nil:
		panic("store: RegisterScheme of " + strconv.Quote(scheme) + " with a nil open function")
	case scheme == "":
		panic("store: RegisterScheme with an empty scheme")
	case builtinSchemes[scheme]:
		panic("store: RegisterScheme of built-in scheme " + strconv.Quote(scheme))
	case schemes[scheme] != nil:
		panic("store: RegisterScheme called twice for scheme " + strconv.Quote(scheme))
	}
	schemes[scheme] = open
}

// Schemes lists the URL schemes Open handles, built-in and registered,
// sorted.
func Schemes() []string {
	schemesMu.RLock()
	defer schemesMu.RUnlock()
	out := make([]string, 0, len(builtinSchemes)+len(schemes))
	for s := range builtinSchemes {
		out = append(out, s)
	}
	for s := range schemes {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Settings are what a list of Options resolves to, for stores implemented
// outside this package (see RegisterScheme).
type Settings struct {
	// Timeout bounds blocking calls whose context has no deadline.
	Timeout time.Duration
	// Logger receives diagnostics; it discards them unless WithLogger
	// gave one.
	Logger *slog.Logger
	// MaxFrameSize, MaxKeys and MaxInflight are the TCP and in-process
	// limits; other stores may apply them where they fit.
	MaxFrameSize, MaxKeys, MaxInflight int
}

// Resolve applies opts to the defaults and returns the result.
func Resolve(opts ...Option) Settings {
	o := buildOptions(opts)
	return Settings{Timeout: o.timeout, Logger: o.logger, MaxFrameSize: o.maxFrameSize, MaxKeys: o.maxKeys,
		MaxInflight: o.maxInflight}
}

// Open opens the store a URL names, so that programs and commands can take
// the store as one string:
//
//   - mem://NAME is an in-process store shared by everything in this
//     process that opens the same NAME (ranks as goroutines); each Open
//     returns a handle whose Close releases that handle, and the store
//     itself goes when the last handle closes. The first Open's options
//     apply. mem:// with no name is a new private store.
//   - file:///PATH is a File store in the directory PATH.
//   - tcp://HOST:PORT dials a TCP store server. With ?serve=1 this process
//     first starts the server on HOST:PORT (port 0 picks one) and returns a
//     *ServedTCP, a client of it that stops the server when closed: the
//     rank that serves uses it, the others dial.
//   - any registered scheme (RegisterScheme), such as etcd://HOST:PORT/PREFIX
//     once package symmetric/store/etcdstore is imported.
//
// Unknown query parameters are refused, so a misspelt setting is not
// silently ignored. Errors match backend.ErrInvalidArgument for a malformed
// URL and backend.ErrNotSupported for an unknown scheme.
func Open(ctx context.Context, rawURL string, opts ...Option) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, backend.Wrap(backend.CodeInvalidArgument, err, "store: parse URL")
	}
	switch u.Scheme {
	case "mem":
		return openMem(u, opts)
	case "file":
		return openFile(u, opts)
	case "tcp":
		return openTCP(ctx, u, opts)
	case "":
		return nil, backend.Errorf(backend.CodeInvalidArgument, "store: URL %q has no scheme (want one of %s)",
			u.Redacted(), strings.Join(Schemes(), ", "))
	}
	schemesMu.RLock()
	open := schemes[u.Scheme]
	schemesMu.RUnlock()
	if open == nil {
		hint := ""
		if u.Scheme == "etcd" {
			hint = ` (import _ "github.com/intranode/intranode/symmetric/store/etcdstore" to enable it)`
		}
		return nil, backend.Errorf(backend.CodeNotSupported, "store: unknown URL scheme %q%s; known: %s",
			u.Scheme, hint, strings.Join(Schemes(), ", "))
	}
	return asStore(open(ctx, u, opts...))
}

// asStore returns s as a Store, or a nil Store when err is set: a
// constructor's nil *T put in an interface is not nil, and a caller that
// checks only for nil before deferring Close must not get one.
func asStore[T Store](s T, err error) (Store, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenPrefixed opens the store rawURL names, as Open does, and returns a
// view of it under prefix (NewPrefixed) whose Close also closes the store.
// It is how a rank of a run opens a shared store that others use too: every
// run picks a fresh prefix, so it never reads an earlier run's keys.
func OpenPrefixed(ctx context.Context, rawURL, prefix string, opts ...Option) (*Prefixed, error) {
	s, err := Open(ctx, rawURL, opts...)
	if err != nil {
		return nil, err
	}
	return newView(s, prefix, s.Close), nil
}

// CheckSharedURL reports whether the ranks of one group can meet through
// rawURL by each opening it with Open (or OpenPrefixed): it refuses a
// tcp:// URL with serve (every rank would start a server of its own), an
// etcd:// URL with a member name (every rank would claim it), an unnamed
// mem:// (every rank would get a private store) and, when the ranks are
// processes, any mem:// URL (named stores are shared only within a
// process). It does not open the store, so other problems show when the
// ranks do. Errors match backend.ErrInvalidArgument.
func CheckSharedURL(rawURL string, processes bool) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return backend.Wrap(backend.CodeInvalidArgument, err, "store: parse URL")
	}
	serve, _ := strconv.ParseBool(u.Query().Get("serve"))
	switch {
	case u.Scheme == "tcp" && serve:
		return backend.Errorf(backend.CodeInvalidArgument,
			"store: URL %q: the ranks dial a TCP store and cannot each serve one; start the server elsewhere and drop serve", u.Redacted())
	case u.Scheme == "etcd" && u.Query().Has("member"):
		return backend.Errorf(backend.CodeInvalidArgument,
			"store: URL %q: member names one client and every rank would claim it; drop it", u.Redacted())
	case u.Scheme == "mem" && processes:
		return backend.Errorf(backend.CodeInvalidArgument,
			"store: URL %q: a mem:// store lives in one process and ranks that are processes cannot share it", u.Redacted())
	case u.Scheme == "mem" && u.Host+u.Path+u.Opaque == "":
		return backend.Errorf(backend.CodeInvalidArgument,
			"store: URL %q: an unnamed mem:// store is private to each Open; name it (mem://NAME) for the ranks to share it", u.Redacted())
	}
	return nil
}

// CheckQuery refuses query parameters of u outside allowed, and parameters
// given twice; store packages use it on URLs passed to their OpenFunc.
func CheckQuery(u *url.URL, allowed ...string) error {
	for k, vs := range u.Query() {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		switch {
		case !ok && len(allowed) == 0:
			return backend.Errorf(backend.CodeInvalidArgument, "store: URL %q: %s:// takes no query parameters, got %q",
				u.Redacted(), u.Scheme, k)
		case !ok:
			return backend.Errorf(backend.CodeInvalidArgument, "store: URL %q: unknown parameter %q (known: %s)",
				u.Redacted(), k, strings.Join(allowed, ", "))
		case len(vs) > 1:
			return backend.Errorf(backend.CodeInvalidArgument, "store: URL %q: parameter %q given %d times", u.Redacted(), k, len(vs))
		}
	}
	return nil
}

// memShared is a named in-process store and the number of open handles.
type memShared struct {
	mem  *Mem
	refs int
}

func openMem(u *url.URL, opts []Option) (Store, error) {
	if err := CheckQuery(u); err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "store: URL %q: mem:// takes no user", u.Redacted())
	}
	name := u.Host + u.Path
	if u.Opaque != "" {
		name = u.Opaque
	}
	if name == "" {
		return NewMem(opts...), nil
	}
	memStoresMu.Lock()
	defer memStoresMu.Unlock()
	sh := memStores[name]
	if sh == nil {
		sh = &memShared{mem: NewMem(opts...)}
		memStores[name] = sh
	}
	sh.refs++
	return newView(sh.mem, "", func() error {
		memStoresMu.Lock()
		defer memStoresMu.Unlock()
		sh.refs--
		if sh.refs == 0 {
			delete(memStores, name)
			return sh.mem.Close()
		}
		return nil
	}), nil
}

func openFile(u *url.URL, opts []Option) (Store, error) {
	if err := CheckQuery(u); err != nil {
		return nil, err
	}
	switch {
	case u.Host != "" && u.Host != "localhost":
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"store: URL %q: file:// names a local directory; want file:///ABSOLUTE/PATH", u.Redacted())
	case u.Opaque != "" || !filepath.IsAbs(u.Path):
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"store: URL %q: the directory must be an absolute path (file:///ABSOLUTE/PATH)", u.Redacted())
	}
	return asStore(NewFile(filepath.Clean(u.Path), opts...))
}

// ServedTCP is what Open returns for tcp://HOST:PORT?serve=1: a client of a
// Server that this process runs. Close closes the client, then the server,
// so the serving rank should close last (the others' calls fail with
// backend.ErrPeerFailed once the server is gone).
type ServedTCP struct {
	*TCP
	// Server is the server this process runs; Server.Addr is the address
	// the other ranks dial.
	Server *Server
}

// Close closes the client, then the server.
func (s *ServedTCP) Close() error {
	cerr := s.TCP.Close()
	serr := s.Server.Close()
	if cerr != nil {
		return cerr
	}
	return serr
}

func openTCP(ctx context.Context, u *url.URL, opts []Option) (Store, error) {
	if err := CheckQuery(u, "serve"); err != nil {
		return nil, err
	}
	switch {
	case u.Host == "" || u.Port() == "":
		return nil, backend.Errorf(backend.CodeInvalidArgument, "store: URL %q: want tcp://HOST:PORT", u.Redacted())
	case u.Path != "" && u.Path != "/", u.User != nil, u.Opaque != "":
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"store: URL %q: tcp:// takes only HOST:PORT and ?serve=1", u.Redacted())
	}
	serve := false
	if v := u.Query().Get("serve"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, backend.Wrap(backend.CodeInvalidArgument, err, fmt.Sprintf("store: URL %q: serve", u.Redacted()))
		}
		serve = b
	}
	if !serve {
		return asStore(DialTCP(ctx, u.Host, opts...))
	}
	srv, err := ListenTCP(u.Host, opts...)
	if err != nil {
		return nil, err
	}
	c, err := DialTCP(ctx, srv.Addr(), opts...)
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	return &ServedTCP{TCP: c, Server: srv}, nil
}
