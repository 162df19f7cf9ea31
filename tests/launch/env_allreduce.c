/* A C program started by a launcher (torchrun-style variables, srun, ...): weftCommInitFromEnv,
 * then an allreduce whose sum every rank checks exactly. Exits 0 when all is right. */
#include <stdio.h>
#include <stdlib.h>

#include "nccl.h"
#include "weft/weft.h"

int main(void) {
  enum { kCount = 1 << 16 };
  ncclComm_t comm;
  if (weftCommInitFromEnv(&comm) != ncclSuccess) {
    fprintf(stderr, "env_allreduce: init failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  int rank = -1, n = 0;
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n);
  int* v = malloc(kCount * sizeof(int));
  if (!v) return 2;
  for (int i = 0; i < kCount; ++i) v[i] = (rank + 1) * (i % 97);
  if (ncclAllReduce(v, v, kCount, ncclInt32, ncclSum, comm, NULL) != ncclSuccess) {
    fprintf(stderr, "env_allreduce: allreduce failed: %s\n", ncclGetLastError(NULL));
    return 3;
  }
  /* Rank r contributed (r + 1) * (i % 97): the sum over n ranks is n (n + 1) / 2 * (i % 97). */
  for (int i = 0; i < kCount; ++i)
    if (v[i] != n * (n + 1) / 2 * (i % 97)) {
      fprintf(stderr, "env_allreduce: rank %d element %d is %d, expected %d\n", rank, i, v[i],
              n * (n + 1) / 2 * (i % 97));
      return 4;
    }
  free(v);
  ncclCommDestroy(comm);
  printf("env_allreduce: rank %d of %d passed\n", rank, n);
  return 0;
}
