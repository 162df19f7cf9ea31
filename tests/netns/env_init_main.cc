// A torchrun-style program: weftCommInitFromEnv, then allreduce and allgather checked exactly.
#include <cstdio>
#include <vector>

#include "nccl.h"
#include "weft/weft.h"

int main() {
  ncclComm_t comm;
  if (weftCommInitFromEnv(&comm) != ncclSuccess) {
    std::fprintf(stderr, "init failed: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n);
  std::vector<double> v(1 << 20, rank + 1.0);
  if (ncclAllReduce(v.data(), v.data(), v.size(), ncclDouble, ncclSum, comm, nullptr) !=
      ncclSuccess)
    return 2;
  for (double x : v)
    if (x != n * (n + 1) / 2.0) return 3;
  std::vector<int> mine(1000, rank), all(1000 * n);
  if (ncclAllGather(mine.data(), all.data(), mine.size(), ncclInt32, comm, nullptr) != ncclSuccess)
    return 4;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 1000; ++i)
      if (all[r * 1000 + i] != r) return 5;
  ncclCommDestroy(comm);
  if (rank == 0) std::printf("init from env: %d ranks passed\n", n);
  return 0;
}
