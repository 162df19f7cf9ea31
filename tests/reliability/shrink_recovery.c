/* Recovery with ncclCommRevoke / ncclCommShrink, as a user meets it: ranks in separate processes
 * against libnccl.so.2.
 *
 *   shrink_recovery death [nranks]       rank 1 is SIGKILLed in the middle of an allreduce; the
 *                                        survivors must get an error (never hang), revoke, shrink
 *                                        with NCCL_SHRINK_ABORT and pass the grid on the new comm
 *   shrink_recovery unreachable [nranks] as death, but the survivors first shrink without excluding
 *                                        the dead rank: that must fail on all of them (never
 *                                        hang), and the right shrink (no revoke) still works
 *   shrink_recovery exclude [nranks]     the last rank leaves without a failure and without
 *                                        calling; the others shrink (NCCL_SHRINK_DEFAULT)
 *   shrink_recovery nonblocking [nranks] config.blocking = 0: init, split and shrink return
 *                                        ncclInProgress, then succeed via ncclCommGetAsyncError
 *
 * Without WEFT_RANK the program forks the ranks itself. With WEFT_RANK, WEFT_WORLD_SIZE and
 * WEFT_ID_FILE (tests/netns) it is one rank; rank 0 publishes the unique id in the file, and the
 * killed rank's status is the launcher's to accept. Exit status 0 when every check passed. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"
#include "rank_procs.h"
#include "shrink_grid.h"

enum { kVictim = 1, kLaunchTimeoutSec = 240 };

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "rank %d: ", rank);                \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
      return 1;                                          \
    }                                                    \
  } while (0)

/* Polls ncclCommGetAsyncError until the communicator leaves ncclInProgress (bounded). */
static ncclResult_t waitAsync(ncclComm_t comm) {
  ncclResult_t st = ncclInProgress;
  const double end = nowSeconds() + 120;
  while (nowSeconds() < end) {
    if (ncclCommGetAsyncError(comm, &st) != ncclSuccess) return ncclInvalidArgument;
    if (st != ncclInProgress) return st;
    usleep(1000);
  }
  return ncclInProgress;
}

/* --- death ---------------------------------------------------------------------------------- */

static atomic_int gInCall;

static void* killMidCall(void* arg) {
  (void)arg;
  usleep(200000);
  while (!atomic_load(&gInCall)) usleep(100);
  usleep(rand() % 2000);
  kill(getpid(), SIGKILL);
  return NULL;
}

/* `mistakeFirst`: before the right shrink (no revoke), one that leaves the dead rank in; it must
 * fail on every survivor (never hang), and the right one must still work after it. */
static int deathRank(ncclComm_t comm, int rank, int n, int mistakeFirst) {
  const size_t count = 1 << 20;
  float* buf = malloc(count * sizeof(float));
  CHECK(buf, "out of memory");
  for (size_t i = 0; i < count; ++i) buf[i] = 1.0f;
  if (rank == kVictim) {
    pthread_t killer;
    srand((unsigned)getpid());
    CHECK(pthread_create(&killer, NULL, killMidCall, NULL) == 0, "no thread");
    for (;;) { /* until the killer strikes */
      atomic_store(&gInCall, 1);
      ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
      atomic_store(&gInCall, 0);
    }
  }
  /* Survivors: allreduces until one fails; the victim dies within a second. */
  const double start = nowSeconds();
  ncclResult_t r = ncclSuccess;
  int calls = 0;
  while (r == ncclSuccess && nowSeconds() - start < 90) {
    r = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
    ++calls;
  }
  CHECK(r != ncclSuccess, "no error %.0f s after rank %d was killed", nowSeconds() - start,
        kVictim);
  fprintf(stderr, "rank %d: call %d failed after %.2f s: %s\n", rank, calls, nowSeconds() - start,
          ncclGetErrorString(r));
  ncclComm_t shrunk = NULL;
  if (mistakeFirst) {
    const double t0 = nowSeconds();
    const ncclResult_t m = ncclCommShrink(comm, NULL, 0, &shrunk, NULL, NCCL_SHRINK_ABORT);
    CHECK(m != ncclSuccess && m != ncclInProgress && !shrunk,
          "a shrink that keeps the dead rank returned %s", ncclGetErrorString(m));
    fprintf(stderr, "rank %d: the shrink keeping rank %d failed after %.2f s: %s\n", rank, kVictim,
            nowSeconds() - t0, ncclGetErrorString(m));
  } else {
    CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke failed: %s",
          ncclGetLastError(comm));
    CHECK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL) == ncclInvalidUsage,
          "a collective on a revoked communicator did not return ncclInvalidUsage");
    CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclInvalidArgument, "revoked twice");
  }
  int excluded = kVictim;
  const double shrinkStart = nowSeconds();
  ncclResult_t s = ncclCommShrink(comm, &excluded, 1, &shrunk, NULL, NCCL_SHRINK_ABORT);
  CHECK(s == ncclSuccess && shrunk, "shrink failed: %s (%s)", ncclGetErrorString(s),
        ncclGetLastError(comm));
  int newN = 0, newRank = -1;
  CHECK(ncclCommCount(shrunk, &newN) == ncclSuccess && newN == n - 1, "new size %d", newN);
  CHECK(ncclCommUserRank(shrunk, &newRank) == ncclSuccess &&
            newRank == (rank < kVictim ? rank : rank - 1),
        "new rank %d", newRank);
  fprintf(stderr, "rank %d: shrunk to rank %d of %d in %.2f s\n", rank, newRank, newN,
          nowSeconds() - shrinkStart);
  CHECK(runShrinkGrid(shrunk) == 0, "grid failed on the shrunk communicator");
  CHECK(ncclCommDestroy(shrunk) == ncclSuccess, "destroy of the new communicator failed");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy of the parent failed");
  free(buf);
  return 0;
}

/* --- exclude -------------------------------------------------------------------------------- */

static int excludeRank(ncclComm_t comm, int rank, int n) {
  float x = (float)(rank + 1);
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
  CHECK(x == (float)(n * (n + 1) / 2), "allreduce gave %g", x);
  const int leaver = n - 1;
  if (rank == leaver) return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  ncclComm_t shrunk = NULL;
  ncclResult_t s = ncclCommShrink(comm, (int*)&leaver, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT);
  CHECK(s == ncclSuccess && shrunk, "shrink failed: %s", ncclGetLastError(comm));
  int newN = 0, newRank = -1;
  CHECK(ncclCommCount(shrunk, &newN) == ncclSuccess && newN == n - 1, "new size %d", newN);
  CHECK(ncclCommUserRank(shrunk, &newRank) == ncclSuccess && newRank == rank, "rank %d", newRank);
  CHECK(runShrinkGrid(shrunk) == 0, "grid failed on the shrunk communicator");
  CHECK(ncclCommDestroy(shrunk) == ncclSuccess, "destroy");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy of the parent");
  return 0;
}

/* --- nonblocking ---------------------------------------------------------------------------- */

static int nonblockingRank(const ncclUniqueId* id, int rank, int n) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, n, *id, rank, &config);
  CHECK(r == ncclInProgress && comm, "non-blocking init returned %s", ncclGetErrorString(r));
  CHECK(waitAsync(comm) == ncclSuccess, "init did not complete: %s", ncclGetLastError(comm));
  /* split into even and odd ranks, key reversing the order */
  ncclComm_t half = NULL;
  r = ncclCommSplit(comm, rank % 2, -rank, &half, &config);
  CHECK(r == ncclInProgress && half, "non-blocking split returned %s", ncclGetErrorString(r));
  CHECK(waitAsync(half) == ncclSuccess, "split did not complete: %s", ncclGetLastError(half));
  const int halfN = (n - rank % 2 + 1) / 2;
  int size = 0, sub = -1;
  CHECK(ncclCommCount(half, &size) == ncclSuccess && size == halfN, "split size %d", size);
  CHECK(ncclCommUserRank(half, &sub) == ncclSuccess && sub == halfN - 1 - rank / 2, "split rank %d",
        sub);
  CHECK(runShrinkGrid(half) == 0, "grid failed on the split communicator");
  /* shrink without the last rank, which leaves without calling */
  const int leaver = n - 1;
  if (rank != leaver) {
    ncclComm_t shrunk = NULL;
    r = ncclCommShrink(comm, (int*)&leaver, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT);
    CHECK(r == ncclInProgress && shrunk, "non-blocking shrink returned %s", ncclGetErrorString(r));
    CHECK(waitAsync(shrunk) == ncclSuccess, "shrink did not complete: %s",
          ncclGetLastError(shrunk));
    CHECK(ncclCommCount(shrunk, &size) == ncclSuccess && size == n - 1, "shrunk size %d", size);
    CHECK(runShrinkGrid(shrunk) == 0, "grid failed on the shrunk communicator");
    /* a non-blocking revoke completes through ncclCommGetAsyncError too */
    r = ncclCommRevoke(shrunk, NCCL_REVOKE_DEFAULT);
    CHECK(r == ncclSuccess || r == ncclInProgress, "revoke returned %s", ncclGetErrorString(r));
    CHECK(waitAsync(shrunk) == ncclSuccess, "revoke did not complete");
    float x = 1;
    CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, shrunk, NULL) == ncclInvalidUsage,
          "a collective on a revoked communicator did not fail");
    CHECK(ncclCommDestroy(shrunk) == ncclSuccess, "destroy");
  }
  CHECK(ncclCommDestroy(half) == ncclSuccess, "destroy of the split");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy of the parent");
  return 0;
}

/* --- launch --------------------------------------------------------------------------------- */

static int runRank(const char* mode, const ncclUniqueId* id, int rank, int n) {
  if (strcmp(mode, "nonblocking") == 0) return nonblockingRank(id, rank, n);
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init failed");
  if (strcmp(mode, "death") == 0) return deathRank(comm, rank, n, 0);
  if (strcmp(mode, "unreachable") == 0) return deathRank(comm, rank, n, 1);
  return excludeRank(comm, rank, n);
}

/* What a forked rank runs (forkRank). */
struct Launch {
  const char* mode;
  const ncclUniqueId* id;
  int n;
};

static int launchedRank(int rank, void* arg) {
  const struct Launch* l = arg;
  return runRank(l->mode, l->id, rank, l->n);
}

static int shareId(int rank, const char* path, ncclUniqueId* id) {
  if (rank == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) return 0;
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    FILE* f = fopen(tmp, "wb");
    if (!f || fwrite(id->internal, sizeof(id->internal), 1, f) != 1) return 0;
    fclose(f);
    return rename(tmp, path) == 0;
  }
  const double end = nowSeconds() + 60;
  while (nowSeconds() < end) {
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t got = fread(id->internal, sizeof(id->internal), 1, f);
      fclose(f);
      if (got == 1) return 1;
    }
    usleep(20000);
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "death";
  const int n = argc > 2 ? atoi(argv[2]) : 4;
  if (strcmp(mode, "death") && strcmp(mode, "unreachable") && strcmp(mode, "exclude") &&
      strcmp(mode, "nonblocking")) {
    fprintf(stderr, "usage: shrink_recovery death|unreachable|exclude|nonblocking [nranks]\n");
    return 2;
  }
  if (n < 3) {
    fprintf(stderr, "need at least 3 ranks\n");
    return 2;
  }
  ncclUniqueId id;
  const char* envRank = getenv("WEFT_RANK");
  if (envRank) { /* one rank of a launcher's job */
    const int rank = atoi(envRank);
    const char* size = getenv("WEFT_WORLD_SIZE");
    const char* file = getenv("WEFT_ID_FILE");
    if (!size || !file || atoi(size) != n || rank < 0 || rank >= n) {
      fprintf(stderr, "set WEFT_RANK, WEFT_WORLD_SIZE (= nranks) and WEFT_ID_FILE\n");
      return 2;
    }
    if (!shareId(rank, file, &id)) return 3;
    return runRank(mode, &id, rank, n);
  }
  if (ncclGetUniqueId(&id) != ncclSuccess) return 3;
  pid_t pids[64];
  if (n > 64) return 2;
  struct Launch launch = {mode, &id, n};
  for (int r = 0; r < n; ++r) {
    pids[r] = forkRank(launchedRank, r, &launch);
    if (pids[r] < 0) return 3;
  }
  int codes[64], failed = 0;
  waitChildren(pids, n, kLaunchTimeoutSec * 1e3, codes);
  for (int r = 0; r < n; ++r) {
    const int killed = strcmp(mode, "death") == 0 || strcmp(mode, "unreachable") == 0;
    const int expected = killed && r == kVictim ? 128 + SIGKILL : 0;
    if (codes[r] != expected) {
      fprintf(stderr, "rank %d exited with %d, expected %d\n", r, codes[r], expected);
      failed = 1;
    }
  }
  if (!failed) printf("%s: %d ranks, every survivor passed\n", mode, n);
  return failed;
}
