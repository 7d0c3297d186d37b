package cpu

// cachedPieceBytes bounds one runtime copy in cachedCopy: below the size
// (1 MiB) from which Go's memmove on amd64 with AVX switches to
// non-temporal stores.
const cachedPieceBytes = 512 << 10

// cachedCopy is copy(dst, src) for the kernels' payload, in pieces that
// the runtime's memmove writes through the cache. From 1 MiB, memmove on
// amd64 streams its stores past the cache to memory; here every copy is
// read soon after, by this rank or a peer on another core, which then has
// to fetch it back from memory. Two-shot bf16 all-reduce of 4 MiB, world 2
// processes on the 2-core development machine (2026-11-26): 565-579 µs
// with copy, 382-389 µs with the copies in 256 KiB pieces; 512 KiB pieces
// are what docs/PERFORMANCE.md's four-run A/B measured.
func cachedCopy(dst, src []byte) {
	n := min(len(dst), len(src))
	for lo := 0; lo < n; lo += cachedPieceBytes {
		hi := min(lo+cachedPieceBytes, n)
		copy(dst[lo:hi], src[lo:hi])
	}
}
