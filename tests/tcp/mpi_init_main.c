/* weftCommInitFromMpi from C: one rank per MPI process, then an allreduce checked exactly.
   Run under mpirun; exits non-zero on any failure. */
#include <stdio.h>
#include <stdlib.h>

#include "weft/weft_mpi.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ncclComm_t comm;
  ncclResult_t r = weftCommInitFromMpi(&comm, MPI_COMM_WORLD);
  int bad = r != ncclSuccess;
  if (!bad) {
    enum { kCount = 100003 };
    float* v = malloc(kCount * sizeof(float));
    for (int i = 0; i < kCount; ++i) v[i] = (float)(rank + 1 + i % 7);
    r = ncclAllReduce(v, v, kCount, ncclFloat, ncclSum, comm, NULL);
    bad = r != ncclSuccess;
    for (int i = 0; !bad && i < kCount; ++i)
      bad = v[i] != (float)(size * (size + 1) / 2 + size * (i % 7));
    free(v);
    ncclCommDestroy(comm);
  }
  if (bad) fprintf(stderr, "rank %d: %s\n", rank, ncclGetErrorString(r));
  int anyBad = 0;
  MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && !anyBad) printf("weftCommInitFromMpi: %d ranks passed\n", size);
  MPI_Finalize();
  return anyBad;
}
