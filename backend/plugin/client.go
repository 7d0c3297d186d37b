//go:build linux

package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// Name is the registry name of the plugin driver: backend.Open(ctx,
// "plugin:/path/to/binary").
const Name = "plugin"

func init() {
	backend.Register(backend.Driver{Name: Name, Priority: 0, Open: openDriver})
}

func openDriver(ctx context.Context, arg string) (backend.Backend, error) {
	return Open(ctx, arg)
}

// Defaults of the host side.
const (
	// DefaultCallTimeout bounds a call whose method takes no context
	// (Stream.Launch, Allocation.Export…) or whose context has no
	// deadline. Waits (Stream.Synchronize, Event.Synchronize) are bounded
	// by their caller's context only.
	DefaultCallTimeout = time.Minute
	// DefaultStartTimeout bounds the plugin's start and handshake when
	// Open's context has no deadline.
	DefaultStartTimeout = 30 * time.Second
	// goneGrace is how long a failed call waits to learn whether the
	// plugin process died, so that the error can say so.
	goneGrace = time.Second
)

// closeGrace bounds Close's orderly stop of the plugin (go-plugin asks it
// to shut down and kills it after two seconds) before it is killed
// outright. Tests shorten it.
var closeGrace = 5 * time.Second

// Option configures Open and NewLoopback.
type Option func(*options)

type options struct {
	log     *slog.Logger
	timeout time.Duration
	args    []string
}

func buildOptions(opts []Option) options {
	o := options{log: slog.New(slog.DiscardHandler), timeout: DefaultCallTimeout}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithLogger sets the host side's logger (quiet by default). At debug
// level the plugin is asked to log too, and its stderr is forwarded here.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithCallTimeout sets the bound of calls without a deadline of their own
// (DefaultCallTimeout).
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithArgs passes command-line arguments to the plugin binary.
func WithArgs(args ...string) Option {
	return func(o *options) { o.args = append([]string(nil), args...) }
}

// Backend is the host side of a plugin: a backend.Backend whose every call
// runs in the plugin process. Devices, allocations, streams, events, graphs,
// modules and functions are ids of objects living there; DevicePtr values
// are the plugin's addresses, meaningful to its kernels only. The one
// memory the host touches is a host allocation's Bytes, a shared mapping of
// the plugin's pages.
type Backend struct {
	name   string
	conn   *conn
	info   helloReply
	client *goplugin.Client // nil when served in this process (NewLoopback)

	closeOnce sync.Once
	closeErr  error
}

var (
	_ backend.Backend   = (*Backend)(nil)
	_ backend.Diagnoser = (*Backend)(nil)
)

// Open starts the plugin binary at path, performs go-plugin's handshake
// (gRPC only, protocol ProtocolVersion) and returns the backend it serves.
// A path without a slash is looked up in PATH. The plugin is a managed
// go-plugin client: Close (or CleanupClients) stops it, and a plugin whose
// host dies exits by itself.
func Open(ctx context.Context, path string, opts ...Option) (*Backend, error) {
	if path == "" {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: no binary named: use plugin:/path/to/binary")
	}
	o := buildOptions(opts)
	exe, err := resolve(path)
	if err != nil {
		return nil, err
	}
	hostEnd, childEnd, err := socketPair()
	if err != nil {
		return nil, err
	}
	defer childEnd.Close() // the child holds its own copy once started
	fds, err := newFDChannel(hostEnd, o.log, nil)
	if err != nil {
		_ = hostEnd.Close()
		return nil, err
	}
	cmd := exec.Command(exe, o.args...)
	// ExtraFiles[0] is descriptor 3 in the child.
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.Env = pluginEnv(o.log.Enabled(ctx, slog.LevelDebug))
	stderr := newTail(o.log, path)
	p := &Plugin{host: &hostSide{fds: fds, opts: o, name: Name + ":" + path, stderr: stderr}}
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{ProtocolVersion: {PluginName: p}},
		Cmd:              cmd,
		SkipHostEnv:      true, // pluginEnv passes it on, ours last
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Managed:          true,
		StartTimeout:     startTimeout(ctx),
		Stderr:           stderr,
		Logger:           newHCLogger(o.log),
	})
	// fail stops the plugin first: once it has exited and its stderr is
	// drained, the message can quote what it said.
	fail := func(format string, err error) (*Backend, error) {
		client.Kill()
		_ = fds.Close()
		if backend.CodeOf(err) != backend.CodeUnknown {
			return nil, err
		}
		return nil, backend.Errorf(backend.CodeUnavailable, format, path, err, stderr.excerpt())
	}
	rpc, err := client.Client()
	if err != nil {
		return fail("plugin: starting %s: %w%s (a plugin calls plugin.Serve and prints nothing on stdout before it)", err)
	}
	raw, err := rpc.Dispense(PluginName)
	if err != nil {
		return fail("plugin: %s: %w%s", err)
	}
	b, ok := raw.(*Backend)
	if !ok {
		return fail("plugin: %s: %w%s", fmt.Errorf("dispensed a %T, not a *plugin.Backend", raw))
	}
	b.client = client
	o.log.Debug("plugin: started", "path", path, "pid", b.info.PID, "backend", b.info.Name)
	return b, nil
}

// pluginEnv is this process's environment (the plugin's backend may be
// configured by it, as the fake is) with the plugin's variables set last,
// replacing any this process inherited itself.
func pluginEnv(debug bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvFD+"=") && !strings.HasPrefix(kv, EnvLog+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, EnvFD+"=3")
	if debug {
		env = append(env, EnvLog+"=debug")
	}
	return env
}

// resolve finds the binary: a path with a slash as given (made absolute, so
// ranks started elsewhere find it too), a bare name through PATH.
func resolve(path string) (string, error) {
	exe := path
	if !strings.Contains(path, "/") {
		found, err := exec.LookPath(path)
		if err != nil {
			return "", backend.Errorf(backend.CodeNotFound, "plugin: %q is not in PATH: %w", path, err)
		}
		exe = found
	}
	abs, err := filepath.Abs(exe)
	if err != nil {
		return "", backend.Errorf(backend.CodeInvalidArgument, "plugin: %s: %w", path, err)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", backend.Errorf(backend.CodeNotFound, "plugin: no binary at %s: %w", abs, fs.ErrNotExist)
	case err != nil:
		return "", backend.Errorf(backend.CodeUnavailable, "plugin: %w", err)
	case st.IsDir() || st.Mode()&0o111 == 0:
		return "", backend.Errorf(backend.CodeInvalidArgument, "plugin: %s is not an executable file", abs)
	}
	return abs, nil
}

func startTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return DefaultStartTimeout
}

// hostSide is what the host end of a connection needs before it exists.
type hostSide struct {
	fds    *fdChannel
	opts   options
	name   string
	stderr *tail // nil when served in this process
}

// newBackend says hello over a new connection. exited is closed when the
// plugin process is gone.
func newBackend(exited <-chan struct{}, h *hostSide, cc grpc.ClientConnInterface) (*Backend, error) {
	c := &conn{cc: cc, fds: h.fds, timeout: h.opts.timeout, log: h.opts.log, exited: exited, stderr: h.stderr, what: h.name}
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.timeout)
	defer cancel()
	ls, tokens := offerLanes(ctx, h.fds, h.opts.log)
	info, err := call[helloReq, helloReply](ctx, c, mHello, &helloReq{Version: ProtocolVersion, HostPID: os.Getpid(), Fast: tokens})
	if err != nil {
		_ = ls.Close()
		return nil, err
	}
	c.fast = ls.keep(info.Fast)
	if info.Version != ProtocolVersion {
		_ = c.fast.Close()
		return nil, backend.Errorf(backend.CodeNotSupported, "plugin: %s speaks protocol %d, this host %d: rebuild the older side", h.name, info.Version, ProtocolVersion)
	}
	c.what = fmt.Sprintf("%s (pid %d)", h.name, info.PID)
	return &Backend{name: h.name, conn: c, info: *info}, nil
}

// Name is "plugin:" followed by the path given to Open.
func (b *Backend) Name() string { return b.name }

// Served is the registry name of the backend the plugin serves.
func (b *Backend) Served() string { return b.info.Name }

// PID is the plugin process's id (this process's own when served by
// NewLoopback).
func (b *Backend) PID() int { return b.info.PID }

// Probe asks the served backend.
func (b *Backend) Probe(ctx context.Context) error {
	_, err := callBounded[empty, empty](ctx, b.conn, mProbe, &empty{})
	return err
}

// Capabilities are the served backend's, as reported at the handshake.
func (b *Backend) Capabilities() backend.Capability { return b.info.Caps }

// DeviceCount asks the served backend.
func (b *Backend) DeviceCount(ctx context.Context) (int, error) {
	r, err := callBounded[empty, countReply](ctx, b.conn, mDeviceCount, &empty{})
	if err != nil {
		return 0, err
	}
	return r.N, nil
}

// DeviceInfo asks the served backend.
func (b *Backend) DeviceInfo(ctx context.Context, i int) (backend.DeviceInfo, error) {
	r, err := callBounded[index, infoReply](ctx, b.conn, mDeviceInfo, &index{I: i})
	if err != nil {
		return backend.DeviceInfo{}, err
	}
	return r.Info, nil
}

// LinkMatrix asks the served backend.
func (b *Backend) LinkMatrix(ctx context.Context) (connectivity.Matrix, error) {
	r, err := callBounded[empty, matrixReply](ctx, b.conn, mLinkMatrix, &empty{})
	if err != nil {
		return connectivity.Matrix{}, err
	}
	return r.Matrix, nil
}

// PeerAccess asks the served backend (which caches).
func (b *Backend) PeerAccess(ctx context.Context, i, j int) (bool, error) {
	r, err := callBounded[pair, answer](ctx, b.conn, mPeerAccess, &pair{I: i, J: j})
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

// FabricSupported asks the served backend (which caches).
func (b *Backend) FabricSupported(ctx context.Context, i int) (bool, error) {
	r, err := callBounded[index, answer](ctx, b.conn, mFabricSupported, &index{I: i})
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

// MulticastSupported asks the served backend.
func (b *Backend) MulticastSupported(ctx context.Context, i int) (bool, error) {
	r, err := callBounded[index, answer](ctx, b.conn, mMulticastSupported, &index{I: i})
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

// Diagnostics describes the plugin, then lists the served backend's own
// checks if it has any.
func (b *Backend) Diagnostics(ctx context.Context) []backend.Diagnostic {
	out := []backend.Diagnostic{{Check: "plugin", OK: true,
		Detail: fmt.Sprintf("%s serves backend %q, protocol %d", b.conn.what, b.info.Name, b.info.Version)}}
	r, err := callBounded[empty, diagnosticsReply](ctx, b.conn, mDiagnostics, &empty{})
	if err != nil {
		return append(out, backend.Diagnostic{Check: "plugin diagnostics", Detail: err.Error(),
			Hint: "the plugin process failed; run with -v to see its stderr"})
	}
	return append(out, r.Checks...)
}

// Open opens device i in the plugin.
func (b *Backend) Open(ctx context.Context, i int) (backend.Device, error) {
	r, err := callBounded[index, deviceReply](ctx, b.conn, mOpenDevice, &index{I: i})
	if err != nil {
		return nil, err
	}
	return &device{c: b.conn, id: r.ID, info: r.Info, gran: r.Granularity, views: map[*hostAllocation]struct{}{}}, nil
}

// Close stops the plugin: go-plugin asks it to shut down (it closes what
// the host left open) and kills it if it has not exited within two
// seconds. Objects of this backend fail with backend.ErrClosed afterwards;
// host allocations keep their Bytes until closed.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.conn.closed.Store(true)
		if b.client != nil {
			b.kill()
		}
		_ = b.conn.fast.Close()
		b.closeErr = b.conn.fds.Close()
	})
	return b.closeErr
}

// kill runs go-plugin's Kill, bounded: its graceful part waits on a
// shutdown call without a deadline, so a plugin that neither answers nor
// exits (stopped, or wedged in a driver call) is killed outright.
func (b *Backend) kill() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.client.Kill()
	}()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		b.conn.log.Debug("plugin: not stopping, killing it", "plugin", b.conn.what)
		_ = syscall.Kill(b.info.PID, syscall.SIGKILL)
		<-done
	}
}

// conn is the host end of one connection: gRPC for calls, the descriptor
// socket beside it.
type conn struct {
	cc      grpc.ClientConnInterface
	fast    lanes // none when the plugin serves none
	fds     *fdChannel
	timeout time.Duration
	log     *slog.Logger
	exited  <-chan struct{}
	stderr  *tail
	what    string // "plugin:/path (pid N)", for messages
	closed  atomic.Bool
}

// call runs one method, turning every failure into a backend error: the
// backend's own (code and message as the plugin had them), a timeout of
// ctx, or the plugin being unreachable or gone.
func call[Req, Resp any](ctx context.Context, c *conn, method string, req *Req) (*Resp, error) {
	if c.closed.Load() {
		return nil, backend.Errorf(backend.CodeClosed, "%s: %s after Close", c.what, method)
	}
	resp := new(Resp)
	fast, err := c.fast.call(ctx, method, req, resp)
	if !fast {
		err = c.cc.Invoke(ctx, "/"+serviceName+"/"+method, req, resp, grpc.CallContentSubtype(codecName))
	}
	if err != nil {
		return nil, c.failure(ctx, method, err)
	}
	return resp, nil
}

// callBounded is call with ctx bounded by the call timeout when it has no
// deadline.
func callBounded[Req, Resp any](ctx context.Context, c *conn, method string, req *Req) (*Resp, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	return call[Req, Resp](ctx, c, method, req)
}

// bound gives ctx the call timeout unless it has a deadline already.
func (c *conn) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

func (c *conn) failure(ctx context.Context, method string, err error) error {
	if be, ok := fromStatus(err); ok {
		return be
	}
	if c.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "%s: %s: backend closed during the call", c.what, method)
	}
	if ctx.Err() != nil {
		return backend.Wrap(backend.CodeTimeout, ctx.Err(), fmt.Sprintf("%s: %s", c.what, method))
	}
	if c.gone() {
		return backend.Errorf(backend.CodeUnavailable, "%s: %s: the plugin process is gone%s: %w", c.what, method, c.stderr.excerpt(), err)
	}
	return backend.Errorf(backend.CodeUnavailable, "%s: %s: %w", c.what, method, err)
}

// gone reports whether the plugin process has exited, waiting a moment for
// the news: a call usually fails on the broken connection just before the
// process's exit is noticed.
func (c *conn) gone() bool {
	t := time.NewTimer(goneGrace)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-c.fds.Done():
		return true
	case <-t.C:
		return false
	}
}
