package collective

import (
	"math"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// maxCount is the most elements of dtype per rank that any call takes: the
// largest count whose every derived size (world blocks of it, in bytes,
// with the kernels' own headroom of 4x) fits an int. A larger count is
// refused as an invalid argument before any size is computed from it, so
// that no product wraps into a small, plausible size.
func maxCount(dtype backend.DType) int { return maxCountOver(dtype, kernels.MaxRanks) }

// maxCountOver is maxCount for a group of world ranks (HostGroups spans
// more than kernels.MaxRanks).
func maxCountOver(dtype backend.DType, world int) int {
	size := dtype.Size()
	if size == 0 || world <= 0 {
		return 0
	}
	return math.MaxInt / 4 / world / size
}
