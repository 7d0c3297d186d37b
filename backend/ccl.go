package backend

import "fmt"

// CCLCreation is how a GPU backend makes the communicators of its vendor
// collective library (NCCL on CUDA, RCCL on ROCm), which serve its
// fallback and inter-host paths. It decides what a peer that dies while a
// communicator is being made costs the survivors, and what each eager call
// costs.
type CCLCreation int

const (
	// CCLGuarded, the default, creates each communicator non-blocking
	// (ncclCommInitRankConfig with blocking=0) and connects it, then
	// duplicates it with ncclCommSplit into a blocking communicator that
	// shares its connections and makes the calls. A peer that dies during
	// any of that is aborted out at the timeout, and calls cost what they
	// cost on a blocking communicator. Where the library lacks
	// ncclCommInitRankConfig or ncclCommSplit (NCCL before 2.18), it is
	// CCLBlocking.
	CCLGuarded CCLCreation = iota
	// CCLBlocking creates each communicator with ncclCommInitRank. A peer
	// that dies during the creation leaves the survivor's creating thread
	// waiting inside the library, with its sockets and shared-memory
	// files, until the process exits.
	CCLBlocking
	// CCLNonBlocking creates non-blocking communicators and makes the
	// calls on them: a creation a dead peer leaves waiting is aborted out
	// at the timeout, but the library runs each eager call on a thread of
	// its own (about 100 µs more a call at 4 ranks with NCCL 2.28); calls
	// replayed from a CUDA graph cost the same.
	CCLNonBlocking
)

var cclCreationNames = [...]string{CCLBlocking: "blocking", CCLGuarded: "guarded", CCLNonBlocking: "nonblocking"}

// String returns the mode's name: "blocking", "guarded" or "nonblocking".
func (c CCLCreation) String() string {
	if c >= 0 && int(c) < len(cclCreationNames) {
		return cclCreationNames[c]
	}
	return fmt.Sprintf("CCLCreation(%d)", int(c))
}

// ParseCCLCreation returns the mode String names; anything else is an
// error matching ErrInvalidArgument.
func ParseCCLCreation(s string) (CCLCreation, error) {
	for c, name := range cclCreationNames {
		if s == name {
			return CCLCreation(c), nil
		}
	}
	return 0, Errorf(CodeInvalidArgument, "collective library creation mode %q: want blocking, guarded or nonblocking", s)
}
