// Runs under an MPI launcher (mpirun, srun) like nccl-tests built with MPI=1: the process index
// and count come from MPI and process 0's unique id reaches the others with MPI_Bcast. Without
// MPI at build time (or outside an MPI launcher) every function reports "not used".
#pragma once
#include "nccl.h"
#include "perf/world.h"

namespace weft::perf {

// True, after MPI_Init, when this process was started by an MPI launcher and the tools were built
// with MPI; `world` then holds MPI_COMM_WORLD's rank and size.
bool mpiStart(int* argc, char*** argv, ProcessWorld* world);
// Shares process 0's id over MPI_COMM_WORLD; false when MPI is not in use.
bool mpiShareUniqueId(const ProcessWorld& world, ncclUniqueId* id);
// MPI_Finalize when mpiStart returned true.
void mpiStop();

}  // namespace weft::perf
