package symmetric

import (
	"sync/atomic"
	"unsafe"
)

// atomicSwapStatus reads and clears a status word that kernels update with
// compare-and-swap. Host-mapped memory is page aligned, so the word is too.
func atomicSwapStatus(word []byte) uint32 {
	_ = word[3]
	return atomic.SwapUint32((*uint32)(unsafe.Pointer(&word[0])), 0)
}
