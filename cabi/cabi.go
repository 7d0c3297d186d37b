package cabi

/*
#cgo CFLAGS: -I${SRCDIR}
#include <string.h>
#include "cabi.h"
*/
import "C"

import (
	"context"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/capi"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/ncclboot"
)

// comms is the registry of live communicators, by handle key.
var comms = struct {
	sync.RWMutex
	m    map[uint64]*capi.Comm
	next uint64
}{m: map[uint64]*capi.Comm{}}

// result records err as the calling thread's last error and returns its
// code.
func result(err error) C.intranodeResult_t {
	if err == nil {
		return C.intranodeSuccess
	}
	msg := err.Error()
	C.intranode_set_last_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
	return C.intranodeResult_t(capi.ResultOf(err))
}

func invalid(format string, args ...any) C.intranodeResult_t {
	return result(backend.Errorf(backend.CodeInvalidArgument, "intranode: "+format, args...))
}

// lookup returns the communicator a handle names.
func lookup(h C.intranodeComm_t) (*capi.Comm, error) {
	if h == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "intranode: comm is NULL")
	}
	if h.magic != C.INTRANODE_COMM_MAGIC {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "intranode: comm %p is not a live communicator (destroyed, or never made)", h)
	}
	comms.RLock()
	c := comms.m[uint64(h.id)]
	comms.RUnlock()
	if c == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "intranode: comm %p was destroyed", h)
	}
	return c, nil
}

//export intranodeGetVersion
func intranodeGetVersion(version *C.int) C.intranodeResult_t {
	if version == nil {
		return invalid("version is NULL")
	}
	*version = C.INTRANODE_VERSION_CODE
	return C.intranodeSuccess
}

//export intranodeGetUniqueId
func intranodeGetUniqueId(out *C.intranodeUniqueId) C.intranodeResult_t {
	if out == nil {
		return invalid("uniqueId is NULL")
	}
	id, err := capi.NewUniqueID()
	if err != nil {
		return result(err)
	}
	C.memcpy(unsafe.Pointer(out), unsafe.Pointer(&id[0]), C.size_t(len(id)))
	return C.intranodeSuccess
}

//export intranodeCommInitRank
func intranodeCommInitRank(out *C.intranodeComm_t, nranks C.int, uid C.intranodeUniqueId, rank C.int, config *C.intranodeConfig_t) C.intranodeResult_t {
	return initComm(out, config, func(cfg capi.Config) (*capi.Comm, error) {
		var id capi.UniqueID
		C.memcpy(unsafe.Pointer(&id[0]), unsafe.Pointer(&uid), C.size_t(len(id)))
		return capi.InitRank(context.Background(), id, int(rank), int(nranks), cfg)
	})
}

//export intranodeCommInitFromNccl
func intranodeCommInitFromNccl(out *C.intranodeComm_t, ncclComm unsafe.Pointer, config *C.intranodeConfig_t) C.intranodeResult_t {
	return initComm(out, config, func(cfg capi.Config) (*capi.Comm, error) {
		if ncclComm == nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "intranode: ncclComm is NULL")
		}
		f, err := ncclboot.Load(os.Getenv("INTRANODE_NCCL_LIBRARY"))
		if err != nil {
			return nil, err
		}
		c, err := ncclboot.Bootstrap(f, ncclComm, ncclboot.Options{Backend: cfg.Backend, Timeout: cfg.Timeout})
		if err != nil && backend.CodeOf(err) == backend.CodeUnknown {
			// Refused by the group (not served here), as InitRank's are.
			err = backend.Wrap(backend.CodeNotSupported, err, "intranode: over an NCCL communicator")
		}
		return c, err
	})
}

// initComm converts a config, makes a comm with mk and hands out its
// handle.
func initComm(out *C.intranodeComm_t, config *C.intranodeConfig_t, mk func(capi.Config) (*capi.Comm, error)) C.intranodeResult_t {
	if out == nil {
		return invalid("comm is NULL")
	}
	*out = nil
	cfg := capi.Config{Device: -1}
	if config != nil {
		if config.size != C.size_t(unsafe.Sizeof(*config)) {
			return invalid("config.size is %d, want %d: start from INTRANODE_CONFIG_INITIALIZER", config.size, unsafe.Sizeof(*config))
		}
		if config.backend != nil {
			cfg.Backend = C.GoString(config.backend)
		}
		if config.timeoutMs < 0 {
			return invalid("config.timeoutMs is %d", config.timeoutMs)
		}
		cfg.Device = int(config.device)
		cfg.Timeout = time.Duration(config.timeoutMs) * time.Millisecond
		cfg.BufferSize = int(config.bufferBytes)
	}
	c, err := mk(cfg)
	if err != nil {
		return result(err)
	}
	h := (*C.struct_intranodeComm)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_intranodeComm{}))))
	if h == nil {
		_ = c.Destroy()
		return result(backend.Errorf(backend.CodeOutOfMemory, "intranode: allocating a comm handle"))
	}
	comms.Lock()
	comms.next++
	key := comms.next
	comms.m[key] = c
	comms.Unlock()
	h.magic, h.id = C.INTRANODE_COMM_MAGIC, C.uint64_t(key)
	*out = h
	return C.intranodeSuccess
}

// attr writes what get returns of a comm into *p.
func attr(h C.intranodeComm_t, p *C.int, name string, get func(*capi.Comm) int) C.intranodeResult_t {
	c, err := lookup(h)
	if err != nil {
		return result(err)
	}
	if p == nil {
		return invalid("%s is NULL", name)
	}
	*p = C.int(get(c))
	return C.intranodeSuccess
}

//export intranodeCommUserRank
func intranodeCommUserRank(h C.intranodeComm_t, rank *C.int) C.intranodeResult_t {
	return attr(h, rank, "rank", (*capi.Comm).Rank)
}

//export intranodeCommCount
func intranodeCommCount(h C.intranodeComm_t, n *C.int) C.intranodeResult_t {
	return attr(h, n, "nranks", (*capi.Comm).World)
}

//export intranodeCommDevice
func intranodeCommDevice(h C.intranodeComm_t, dev *C.int) C.intranodeResult_t {
	return attr(h, dev, "device", (*capi.Comm).Device)
}

//export intranodeCommGetAsyncError
func intranodeCommGetAsyncError(h C.intranodeComm_t, out *C.intranodeResult_t) C.intranodeResult_t {
	c, err := lookup(h)
	if err != nil {
		return result(err)
	}
	if out == nil {
		return invalid("asyncError is NULL")
	}
	*out = C.intranodeSuccess
	if aerr := c.AsyncError(); aerr != nil {
		*out = result(aerr)
	}
	return C.intranodeSuccess
}

//export intranodeCommDestroy
func intranodeCommDestroy(h C.intranodeComm_t) C.intranodeResult_t {
	return release(h, (*capi.Comm).Destroy)
}

//export intranodeCommAbort
func intranodeCommAbort(h C.intranodeComm_t) C.intranodeResult_t {
	return release(h, (*capi.Comm).Abort)
}

// release invalidates handle h and ends its comm with end (Destroy or
// Abort).
func release(h C.intranodeComm_t, end func(*capi.Comm) error) C.intranodeResult_t {
	if _, err := lookup(h); err != nil {
		return result(err)
	}
	comms.Lock()
	c := comms.m[uint64(h.id)]
	delete(comms.m, uint64(h.id))
	comms.Unlock()
	h.magic, h.id = 0, 0
	C.free(unsafe.Pointer(h))
	if c == nil {
		return invalid("comm was destroyed")
	}
	return result(end(c))
}

// with runs f on the communicator h names and returns its result.
func with(h C.intranodeComm_t, f func(*capi.Comm) error) C.intranodeResult_t {
	c, err := lookup(h)
	if err != nil {
		return result(err)
	}
	return result(f(c))
}

// do runs one collective.
func do(h C.intranodeComm_t, call capi.Call) C.intranodeResult_t {
	return with(h, func(c *capi.Comm) error { return c.Do(context.Background(), call) })
}

//export intranodeAllReduce
func intranodeAllReduce(send, recv unsafe.Pointer, count C.size_t, dt C.intranodeDataType_t, op C.intranodeRedOp_t, h C.intranodeComm_t, stream unsafe.Pointer) C.intranodeResult_t {
	return do(h, capi.Call{Op: collective.OpAllReduce, Send: uintptr(send), Recv: uintptr(recv), Count: uint64(count),
		DType: backend.DType(dt), Red: backend.ReduceOp(op), Stream: uintptr(stream)})
}

//export intranodeReduceScatter
func intranodeReduceScatter(send, recv unsafe.Pointer, count C.size_t, dt C.intranodeDataType_t, op C.intranodeRedOp_t, h C.intranodeComm_t, stream unsafe.Pointer) C.intranodeResult_t {
	return do(h, capi.Call{Op: collective.OpReduceScatter, Send: uintptr(send), Recv: uintptr(recv), Count: uint64(count),
		DType: backend.DType(dt), Red: backend.ReduceOp(op), Stream: uintptr(stream)})
}

//export intranodeAllGather
func intranodeAllGather(send, recv unsafe.Pointer, count C.size_t, dt C.intranodeDataType_t, h C.intranodeComm_t, stream unsafe.Pointer) C.intranodeResult_t {
	return do(h, capi.Call{Op: collective.OpAllGather, Send: uintptr(send), Recv: uintptr(recv), Count: uint64(count),
		DType: backend.DType(dt), Stream: uintptr(stream)})
}

//export intranodeBroadcast
func intranodeBroadcast(send, recv unsafe.Pointer, count C.size_t, dt C.intranodeDataType_t, root C.int, h C.intranodeComm_t, stream unsafe.Pointer) C.intranodeResult_t {
	return do(h, capi.Call{Op: collective.OpBroadcast, Send: uintptr(send), Recv: uintptr(recv), Count: uint64(count),
		DType: backend.DType(dt), Root: int(root), Stream: uintptr(stream)})
}

//export intranodeAllToAll
func intranodeAllToAll(send, recv unsafe.Pointer, count C.size_t, dt C.intranodeDataType_t, h C.intranodeComm_t, stream unsafe.Pointer) C.intranodeResult_t {
	return do(h, capi.Call{Op: collective.OpAllToAll, Send: uintptr(send), Recv: uintptr(recv), Count: uint64(count),
		DType: backend.DType(dt), Stream: uintptr(stream)})
}

//export intranodeStreamCreate
func intranodeStreamCreate(h C.intranodeComm_t, out *unsafe.Pointer) C.intranodeResult_t {
	c, err := lookup(h)
	if err != nil {
		return result(err)
	}
	if out == nil {
		return invalid("stream is NULL")
	}
	s, err := c.NewStream(context.Background())
	if err != nil {
		return result(err)
	}
	*out = C.intranode_ptr(C.uintptr_t(s)) // a runtime handle or a token, never a Go pointer
	return C.intranodeSuccess
}

//export intranodeStreamDestroy
func intranodeStreamDestroy(h C.intranodeComm_t, stream unsafe.Pointer) C.intranodeResult_t {
	return with(h, func(c *capi.Comm) error { return c.DestroyStream(uintptr(stream)) })
}

//export intranodeStreamSynchronize
func intranodeStreamSynchronize(h C.intranodeComm_t, stream unsafe.Pointer) C.intranodeResult_t {
	return with(h, func(c *capi.Comm) error { return c.SyncStream(context.Background(), uintptr(stream)) })
}

//export intranodeMemAlloc
func intranodeMemAlloc(h C.intranodeComm_t, out *unsafe.Pointer, size C.size_t) C.intranodeResult_t {
	c, err := lookup(h)
	if err != nil {
		return result(err)
	}
	if out == nil {
		return invalid("ptr is NULL")
	}
	if uint64(size) > 1<<62 {
		return invalid("allocation of %d bytes", uint64(size))
	}
	p, err := c.Alloc(context.Background(), int(size))
	if err != nil {
		return result(err)
	}
	*out = C.intranode_ptr(C.uintptr_t(p))
	return C.intranodeSuccess
}

//export intranodeMemFree
func intranodeMemFree(h C.intranodeComm_t, ptr unsafe.Pointer) C.intranodeResult_t {
	return with(h, func(c *capi.Comm) error { return c.Free(uintptr(ptr)) })
}
