//go:build linux

package plugin

import (
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// ProtocolVersion is the version of the wire protocol between a host and a
// plugin built with this package. go-plugin refuses to connect a host and a
// plugin whose versions differ, with a message saying which side to rebuild.
// It changes whenever a message or method below changes incompatibly.
const ProtocolVersion = 1

// PluginName is the name the backend is dispensed under in go-plugin's
// plugin map.
const PluginName = "backend"

// Handshake is the go-plugin handshake shared by hosts and plugins. The
// cookie only keeps a plugin binary from doing anything when it is run by
// hand; it is not a security measure.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "INTRANODE_BACKEND_PLUGIN",
	MagicCookieValue: "4c1f0e2a-intranode-backend-plugin",
}

// EnvFD names the environment variable through which the host tells the
// plugin which inherited descriptor is its end of the descriptor socket.
const EnvFD = "INTRANODE_PLUGIN_FD"

// EnvLog names the environment variable that turns on the plugin's own
// debug logging (to its stderr, which the host forwards to its logger). The
// host sets it when its logger is enabled at debug level.
const EnvLog = "INTRANODE_PLUGIN_LOG"

// serviceName is the gRPC service of the protocol.
const serviceName = "intranode.plugin.v1.Backend"

// copyChunk bounds the payload of one copy message, well below gRPC's
// default 4 MiB message limit (which the in-process test connection of
// go-plugin keeps).
const copyChunk = 1 << 20

// The messages. Objects living in the plugin are named by ids the server
// hands out; ids are never reused, so a stale id is reported as closed.
// Descriptors never travel in these messages: a token names the descriptor
// sent alongside on the descriptor socket (see fdChannel).

// empty is a message with nothing to say; the codec encodes it as no bytes.
type empty struct{}

// ref names one plugin object.
type ref struct{ ID uint64 }

// answer is a yes/no reply.
type answer struct{ OK bool }

// index names a device by its index on the host.
type index struct{ I int }

// pair names two devices.
type pair struct{ I, J int }

// helloReq opens a connection. Fast names the plugin's ends of the fast
// lanes, sent on the descriptor socket.
type helloReq struct {
	Version int
	HostPID int
	Fast    []uint64
}

// helloReply describes the served backend; Fast is how many of the fast
// lanes, the first ones, the plugin serves.
type helloReply struct {
	Version int
	Name    string
	Caps    backend.Capability
	PID     int
	Fast    int
}

type countReply struct{ N int }

type infoReply struct{ Info backend.DeviceInfo }

type matrixReply struct{ Matrix connectivity.Matrix }

type diagnosticsReply struct{ Checks []backend.Diagnostic }

// deviceReply describes an opened device handle.
type deviceReply struct {
	ID          uint64
	Info        backend.DeviceInfo
	Granularity int
}

// allocReq asks device Dev for Size bytes (of handle kind Kind when
// shareable).
type allocReq struct {
	Dev  uint64
	Size int
	Kind backend.HandleKind
}

// allocReply describes an allocation. For host allocations Token names the
// descriptor that maps the host view and MapSize is the length to map.
type allocReply struct {
	ID      uint64
	Ptr     backend.DevicePtr
	Size    int
	Token   uint64
	MapSize int
}

// importReq maps a handle on device Dev; Token names the descriptor of an
// fd handle.
type importReq struct {
	Dev    uint64
	Kind   backend.HandleKind
	Token  uint64
	Opaque []byte
	Size   int
}

type exportReq struct {
	ID   uint64
	Kind backend.HandleKind
}

type exportReply struct {
	Kind   backend.HandleKind
	Token  uint64
	Opaque []byte
	Size   int
}

type copyToReq struct {
	Dev  uint64
	Dst  backend.DevicePtr
	Data []byte
}

type copyFromReq struct {
	Dev uint64
	Src backend.DevicePtr
	N   int
}

type copyFromReply struct{ Data []byte }

type memsetReq struct {
	Dev uint64
	Dst backend.DevicePtr
	V   byte
	N   int
}

type eventReq struct {
	Dev    uint64
	Timing bool
}

type moduleReq struct {
	Dev   uint64
	Name  string
	Image []byte
}

type functionReq struct {
	Module uint64
	Name   string
}

// wireArg is a kernel argument: its C size and its bits.
type wireArg struct {
	Size int
	Bits uint64
}

type launchReq struct {
	Stream    uint64
	Func      uint64
	Grid      backend.Dim3
	Block     backend.Dim3
	SharedMem uint32
	Early     bool
	Args      []wireArg
}

type copyAsyncReq struct {
	Stream   uint64
	Dst, Src backend.DevicePtr
	N        int
}

// streamEventReq pairs a stream with an event (Record, WaitEvent).
type streamEventReq struct {
	Stream, Event uint64
}

type elapsedReq struct {
	Event, Start uint64
}

type elapsedReply struct{ Nanos int64 }

type graphLaunchReq struct {
	Graph, Stream uint64
}

// Method names of the service.
const (
	mHello              = "Hello"
	mProbe              = "Probe"
	mDeviceCount        = "DeviceCount"
	mDeviceInfo         = "DeviceInfo"
	mLinkMatrix         = "LinkMatrix"
	mPeerAccess         = "PeerAccess"
	mFabricSupported    = "FabricSupported"
	mMulticastSupported = "MulticastSupported"
	mDiagnostics        = "Diagnostics"
	mOpenDevice         = "OpenDevice"
	mCloseDevice        = "CloseDevice"
	mAlloc              = "Alloc"
	mAllocShareable     = "AllocShareable"
	mAllocHost          = "AllocHost"
	mImport             = "Import"
	mExport             = "Export"
	mFree               = "Free"
	mCopyToDevice       = "CopyToDevice"
	mCopyFromDevice     = "CopyFromDevice"
	mMemset             = "Memset"
	mNewStream          = "NewStream"
	mNewEvent           = "NewEvent"
	mLoadModule         = "LoadModule"
	mFunction           = "Function"
	mCloseModule        = "CloseModule"
	mLaunch             = "Launch"
	mCopyAsync          = "CopyAsync"
	mRecord             = "Record"
	mWaitEvent          = "WaitEvent"
	mSynchronize        = "Synchronize"
	mBeginCapture       = "BeginCapture"
	mEndCapture         = "EndCapture"
	mCloseStream        = "CloseStream"
	mEventSynchronize   = "EventSynchronize"
	mEventDone          = "EventDone"
	mElapsed            = "Elapsed"
	mCloseEvent         = "CloseEvent"
	mLaunchGraph        = "LaunchGraph"
	mCloseGraph         = "CloseGraph"
)
