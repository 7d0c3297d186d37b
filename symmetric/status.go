package symmetric

import (
	"sync/atomic"
	"unsafe"

	"github.com/intranode/intranode/kernels"
)

// atomicSwapStatus reads and clears a status word that kernels update with
// compare-and-swap. Host-mapped memory is page aligned, so the word is too.
func atomicSwapStatus(word []byte) uint32 {
	_ = word[3]
	return atomic.SwapUint32((*uint32)(unsafe.Pointer(&word[0])), 0)
}

// SetFailed sets the failed word (kernels.FailedWord) of status words
// that Memory.Confirm launches read: from then on this rank confirms no
// vendor call, so its peers time out instead of trusting one this rank is
// giving up on. Set it before aborting the vendor communicator.
func SetFailed(words []byte) {
	_ = words[4*kernels.FailedWord+3]
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&words[4*kernels.FailedWord])), 1)
}

// SetClosed writes kernels.StatusClosed into a status word that kernels
// still running may watch, unless a failure is already recorded there:
// their waits stop at their next look at it instead of at their deadline.
// Set it before freeing what such kernels use.
func SetClosed(words []byte) {
	_ = words[3]
	atomic.CompareAndSwapUint32((*uint32)(unsafe.Pointer(&words[0])), 0, kernels.EncodeStatus(kernels.StatusClosed, 0, 0))
}
