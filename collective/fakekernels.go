package collective

// The fake backend's kernels are Go code in kernels/cpu, registered with
// the fake when that package is loaded. Importing it here keeps the
// promise of the package doc: a program that imports collective and
// backend/fake, and nothing else, has them (backend/fake cannot import
// them itself: they are built on its kernel API).
import _ "github.com/intranode/intranode/kernels/cpu"
