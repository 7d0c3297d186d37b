// Package plugin runs intranode backends out of process, through
// hashicorp/go-plugin, so that a vendor can ship a backend as its own
// binary — built with its own toolchain, closed-source if need be — and
// every intranode program loads it like an in-tree one:
//
//	b, err := backend.Open(ctx, "plugin:/opt/acme/intranode-acme-plugin")
//	intranode conformance --backend plugin:/opt/acme/intranode-acme-plugin --world 2
//
// A plugin's main builds its backend and calls Serve; the host side is the
// driver registered here as "plugin" (Open), whose Backend implements
// backend.Backend by calling the plugin. One package holds both ends — the
// handshake (Handshake, ProtocolVersion), the plugin map (PluginName), the
// protocol and its glue (Plugin) — as go-plugin's own examples do.
//
// # Process model
//
// go-plugin starts the binary, checks the magic cookie and the protocol
// version (a mismatch is refused with a message naming the side to rebuild)
// and accepts gRPC only (AllowedProtocols). The client is Managed, so
// go-plugin's CleanupClients stops it; Backend.Close stops it too, asking
// first and killing after two seconds. A plugin also exits by itself when
// its host is gone, however the host went (an exit without Close, a crash,
// SIGKILL): the kernel closes the host's end of the descriptor socket below
// and the plugin, which watches it, cleans up and exits. go-plugin's hclog
// output goes to the host's slog logger, errors only unless that logger is
// at debug level; the plugin's stderr is kept for error messages.
//
// A plugin must write nothing on stdout before Serve: the handshake is the
// first line there. Open's error says so when a binary breaks that rule.
//
// # What crosses the boundary
//
// Device memory, streams and kernels stay in the plugin. The host holds
// opaque handles: DevicePtr values are the plugin's addresses (meaningful to
// its kernels, which is all they are for), and devices, allocations,
// streams, events, graphs, modules and functions are ids of objects kept by
// the plugin. What never changes (a pointer, a size, a device's info) is
// cached on the host, so methods without a context do not cross the
// boundary. Kernels are the plugin's: a Go backend registers them in the
// plugin binary (the fake's via kernels/cpu), a GPU backend loads its own
// code objects there.
//
// Every call is a unary gRPC call. Calls with a context honour it; a call
// whose method takes no context (Launch, Export, Close…) or whose context
// has no deadline gets DefaultCallTimeout (WithCallTimeout), except the
// waits, Stream.Synchronize and Event.Synchronize, which are bounded by
// their caller's context alone. A call interrupted because the plugin died
// fails at once with an error matching backend.ErrUnavailable that says the
// plugin process is gone and quotes the end of its stderr; it never hangs.
//
// # Errors
//
// The server turns every error into a gRPC status whose code is the
// nearest gRPC code (ErrNotSupported → Unimplemented, ErrTimeout →
// DeadlineExceeded, …) and whose ErrorInfo detail carries the backend code
// exactly; the host turns it back into a *backend.Error with the plugin's
// message, so errors.Is(err, backend.ErrOutOfMemory) and backend.CodeOf
// work on the host as they do in the plugin. A status without that detail
// is a failure of the connection, reported as ErrUnavailable (or
// ErrTimeout when the caller's context ended).
//
// # Messages
//
// The gRPC service is written by hand (a grpc.ServiceDesc of unary
// methods) and its messages are Go structs encoded with encoding/gob,
// registered as a gRPC codec. Both ends of the protocol are this package —
// vendors call Serve, they never speak the protocol — so nothing needs a
// language-neutral schema, and the simplest robust choice is the one with
// no protoc, no generated code to keep in step and nothing for CI to
// install; byte slices (copies, fabric handles) travel as they are.
// ProtocolVersion pins the messages. Copies are split into messages of
// 1 MiB, under gRPC's default 4 MiB limit. The codec keeps encoders and
// decoders that have already exchanged a message type's definitions, so a
// message costs its value only; the bytes are those of a fresh encoder.
//
// # The fast lane
//
// A unary gRPC call crosses several goroutines on each side, several times
// a bare socket's round trip (BenchmarkCall; docs/PERFORMANCE.md), and
// most of a collective's calls are short stream calls. Those
// (Launch, CopyAsync, Record, WaitEvent, EventDone, LaunchGraph) also go
// over SOCK_SEQPACKET socketpairs of their own, which the host sends the
// plugin on the descriptor channel at Hello: a request is one packet (the method's
// index, then the gob message), its reply another, written and read by the
// calling goroutine on the host and by one goroutine in the plugin. Errors
// keep their code and message, as over gRPC. A host opens four lanes (ranks
// that are goroutines of one process share its plugin); each serves one call
// at a time, so a call that finds them all busy, a request over 16 KiB and
// every call that waits for the device go over gRPC; a lane that fails is
// dropped and its calls go back to gRPC, which reports what is wrong with
// the plugin. A plugin of an earlier build answers Hello without lanes and
// the host keeps to gRPC.
//
// # Descriptors
//
// Shareable allocations exported as file descriptors must reach other
// ranks' plugins, and descriptors cannot travel inside gRPC. The symmetric
// layer moves them between host processes (rank A's host exports, the IPC
// channel carries the descriptor to rank B's host, which imports), so each
// host must move descriptors to and from its own plugin: Export brings the
// plugin's descriptor into the host, Import sends the host's into the
// plugin.
//
// They travel on a side channel: a SOCK_SEQPACKET socketpair made by the
// host, one end inherited by the plugin as descriptor 3 (EnvFD names it).
// A descriptor goes with SCM_RIGHTS in a message carrying a token; the
// gRPC request or reply names the token and the receiver claims the
// descriptor by it. The alternative, pidfd_getfd, was rejected: it copies a
// descriptor out of another process only with ptrace rights over it, which
// Yama (ptrace_scope 1, the common default) grants a parent over its child
// but not the plugin over its host, and scope 2 or 3, or a container's
// seccomp profile, deny altogether; it also needs Linux 5.6. SCM_RIGHTS
// needs no privilege, works both ways on any Linux, is what the IPC channel
// between ranks already uses, and the socketpair is private to the pair,
// with no name to guard. The socket doubles as the plugin's lifeline (see
// above).
//
// # Host memory
//
// Host allocations are the one memory both sides touch: kernels in the
// plugin write status words there and the host reads them through Bytes
// without a copy. The host maps the same pages: a device that implements
// SharedHostAllocator hands the plugin a descriptor for them; a device
// whose shareable memory is host memory anyway, as the fake's memfds are,
// needs nothing, because the server proves that once per device (writes
// through a mapping of an exported descriptor and through the device are
// seen by the other) and backs host allocations with shareable memory.
//
// # Testing
//
// Package plugintest serves a backend over go-plugin's in-process gRPC
// connection (TestPluginGRPCConn, with NewLoopback), so the conformance
// suite runs through the whole protocol without building a binary; this
// package's tests also run it against cmd/intranode-fake-plugin as real
// processes, two ranks each with its own plugin.
//
// Plugins need Linux (SCM_RIGHTS on a SOCK_SEQPACKET socketpair, shared
// mappings); elsewhere the driver says so.
package plugin
