// collectives.cu: the CUDA build of the intranode kernel module
// (kernels.ModuleName). The algorithms are in intranode.cuh, the entry points
// in entry.cuh; this file only picks the CUDA port layer. Built into
// collectives.fatbin by the Makefile in this directory.
#include "port.cuh"

#include "intranode.cuh"

#include "entry.cuh"
