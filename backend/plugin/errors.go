//go:build linux

package plugin

import (
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intranode/intranode/backend"
)

// errorDomain marks the ErrorInfo detail a server attaches to every error
// the backend (or the server) returned, so the host can tell a backend's
// error from a failure of the connection itself.
const errorDomain = "intranode.backend"

// grpcCodes maps backend codes to the nearest gRPC codes. The map is
// one-to-one, so a status without our detail still maps back sensibly, but
// the detail is what the host reads.
var grpcCodes = map[backend.Code]codes.Code{
	backend.CodeUnknown:         codes.Unknown,
	backend.CodeNotSupported:    codes.Unimplemented,
	backend.CodeUnavailable:     codes.Unavailable,
	backend.CodeInvalidArgument: codes.InvalidArgument,
	backend.CodeTimeout:         codes.DeadlineExceeded,
	backend.CodeOutOfMemory:     codes.ResourceExhausted,
	backend.CodeNotFound:        codes.NotFound,
	backend.CodeClosed:          codes.FailedPrecondition,
	backend.CodePeerFailed:      codes.Aborted,
	backend.CodeInternal:        codes.Internal,
}

// toStatus turns an error of the served backend into a gRPC status error
// whose code is the nearest gRPC code and whose ErrorInfo detail carries the
// backend code exactly. The message is the error's text.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	code := backend.CodeOf(err)
	gc, ok := grpcCodes[code]
	if !ok {
		gc = codes.Unknown
	}
	st := status.New(gc, err.Error())
	info := &errdetails.ErrorInfo{
		Reason:   strings.ToUpper(strings.ReplaceAll(code.String(), " ", "_")),
		Domain:   errorDomain,
		Metadata: map[string]string{"code": strconv.Itoa(int(code))},
	}
	if detailed, derr := st.WithDetails(info); derr == nil {
		st = detailed
	}
	return st.Err()
}

// fromStatus recovers a backend error from a status the server made with
// toStatus: the plugin's message and code, so errors.Is against the backend
// sentinels works on the host as it does in the plugin. ok is false for any
// other error: the call failed in gRPC or the connection, not the backend.
func fromStatus(err error) (_ error, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() == codes.OK {
		return nil, false
	}
	for _, d := range st.Details() {
		info, isInfo := d.(*errdetails.ErrorInfo)
		if !isInfo || info.GetDomain() != errorDomain {
			continue
		}
		n, perr := strconv.Atoi(info.GetMetadata()["code"])
		if perr != nil {
			return nil, false
		}
		return &backend.Error{Code: backend.Code(n), Msg: st.Message()}, true
	}
	return nil, false
}
