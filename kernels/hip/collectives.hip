// collectives.hip: the HIP build of the intranode kernel module. The
// algorithms and entry points are the CUDA ones (kernels/cuda); only the
// port layer differs.
#include "port_hip.h"

#include "../cuda/intranode.cuh"

#include "../cuda/entry.cuh"
