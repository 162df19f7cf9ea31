/* A plain NCCL program, compiled against NVIDIA's nccl.h and linked against NVIDIA's
 * libnccl.so, that uses host memory only. Run with LD_LIBRARY_PATH pointing at Weft, it must
 * work unchanged: that is the drop-in promise. */
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cmd)                                                                 \
  do {                                                                             \
    ncclResult_t r_ = (cmd);                                                       \
    if (r_ != ncclSuccess) {                                                       \
      fprintf(stderr, "%s:%d %s -> %s (%s)\n", __FILE__, __LINE__, #cmd,           \
              ncclGetErrorString(r_), ncclGetLastError(NULL));                     \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

enum { kRanks = 4, kCount = 100003 };

static int checkAllReduce(ncclComm_t* comms, int n) {
  float* in[kRanks];
  float* out[kRanks];
  for (int r = 0; r < n; ++r) {
    in[r] = malloc(sizeof(float) * kCount);
    out[r] = malloc(sizeof(float) * kCount);
    for (int i = 0; i < kCount; ++i) in[r][i] = (float)(r + i % 7);
  }
  CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r)
    CHECK(ncclAllReduce(in[r], out[r], kCount, ncclFloat, ncclSum, comms[r], NULL));
  CHECK(ncclGroupEnd());
  int wrong = 0;
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < kCount; ++i) {
      float want = (float)(n * (n - 1) / 2 + n * (i % 7));
      if (out[r][i] != want) ++wrong;
    }
    free(in[r]);
    free(out[r]);
  }
  return wrong;
}

int main(void) {
  int version = 0;
  CHECK(ncclGetVersion(&version));
  /* Proof of which library answered: Weft exports its own extension symbols. */
  void* weft = dlsym(RTLD_DEFAULT, "weftVersionString");
  printf("ncclGetVersion=%d library=%s\n", version, weft ? "weft" : "other");
  if (!weft && !getenv("DROPIN_ALLOW_OTHER")) {
    fprintf(stderr, "libnccl.so.2 that was loaded is not Weft\n");
    return 3;
  }

  /* Ranks as threads of one process. */
  ncclComm_t comms[kRanks];
  CHECK(ncclCommInitAll(comms, kRanks, NULL));
  int wrong = checkAllReduce(comms, kRanks);
  int count = 0, rank = -1;
  CHECK(ncclCommCount(comms[2], &count));
  CHECK(ncclCommUserRank(comms[2], &rank));
  for (int r = 0; r < kRanks; ++r) CHECK(ncclCommDestroy(comms[r]));
  if (wrong || count != kRanks || rank != 2) {
    fprintf(stderr, "threads: wrong=%d count=%d rank=%d\n", wrong, count, rank);
    return 1;
  }

  /* Ranks as processes, sharing a unique id made before fork. */
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  pid_t pids[2];
  for (int p = 0; p < 2; ++p) {
    pids[p] = fork();
    if (pids[p] == 0) {
      ncclComm_t comm;
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      CHECK(ncclCommInitRankConfig(&comm, 2, id, p, &config));
      double v[3] = {p + 1.0, 2.0 * p, 5.0};
      CHECK(ncclAllReduce(v, v, 3, ncclDouble, ncclMax, comm, NULL));
      int ok = v[0] == 2.0 && v[1] == 2.0 && v[2] == 5.0;
      CHECK(ncclCommDestroy(comm));
      _exit(ok ? 0 : 1);
    }
  }
  int failed = 0;
  for (int p = 0; p < 2; ++p) {
    int status = 0;
    waitpid(pids[p], &status, 0);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (failed) {
    fprintf(stderr, "processes: a rank failed\n");
    return 1;
  }
  printf("drop-in OK\n");
  return 0;
}
