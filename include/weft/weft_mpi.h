/*
 * weftCommInitFromMpi: a communicator with one rank per process of an MPI communicator, the unique
 * id shared with MPI_Bcast (what nccl-tests does when built with MPI=1). Header-only, so it calls
 * whichever library the program links (libnccl.so.2 or libweft.so) and Weft itself needs no MPI.
 * Include after <mpi.h> is available; link the program with MPI.
 */
#ifndef WEFT_WEFT_MPI_H_
#define WEFT_WEFT_MPI_H_

#include <mpi.h>

#include "weft/weft.h"

/* Rank and size of `mpiComm` become the communicator's; collective over `mpiComm`. */
static inline ncclResult_t weftCommInitFromMpi(ncclComm_t* comm, MPI_Comm mpiComm) {
  int rank = 0, size = 0;
  if (MPI_Comm_rank(mpiComm, &rank) != MPI_SUCCESS || MPI_Comm_size(mpiComm, &size) != MPI_SUCCESS)
    return ncclInvalidArgument;
  ncclUniqueId id;
  ncclResult_t made = ncclSuccess;
  if (rank == 0) made = ncclGetUniqueId(&id);
  /* Rank 0's failure travels with the id, so every rank returns the same error. */
  int ok = made == ncclSuccess;
  if (MPI_Bcast(&ok, 1, MPI_INT, 0, mpiComm) != MPI_SUCCESS) return ncclSystemError;
  if (!ok) return rank == 0 ? made : ncclRemoteError;
  if (MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, mpiComm) != MPI_SUCCESS) return ncclSystemError;
  return ncclCommInitRank(comm, size, id, rank);
}

#endif /* WEFT_WEFT_MPI_H_ */
