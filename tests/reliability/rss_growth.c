/* A process that creates and destroys communicators again and again must not grow. Runs
 * `warmup` cycles, reads the resident set size (/proc/self/statm), runs `cycles` more and fails
 * when the growth per cycle exceeds `bound` bytes. The warm-up lets the allocator's arenas and
 * caches settle; spreading the growth over many cycles keeps page-sized allocator noise below
 * the bound.
 *   threads: a cycle is ncclCommInitAll of `nranks` communicators, then ncclCommDestroy of each.
 *   procs:   two processes; a cycle is ncclCommInitRank(2) in each (rank 0 sends the unique id
 *            through a pipe), then ncclCommDestroy. Both processes are measured.
 * Usage: rss_growth threads|procs [warmup] [cycles] [bound bytes per cycle] [nranks] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"
#include "rank_procs.h"

/* kChildExitMs: how long rank 0, done measuring, waits for rank 1 to finish its own cycles. */
enum { kMaxRanks = 8, kChildExitMs = 300000 };

static long residentBytes(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

static int threadCycle(int nranks) {
  ncclComm_t comms[kMaxRanks];
  if (ncclCommInitAll(comms, nranks, NULL) != ncclSuccess) return 1;
  for (int r = 0; r < nranks; ++r)
    if (ncclCommDestroy(comms[r]) != ncclSuccess) return 1;
  return 0;
}

/* One cycle of one of the two processes; `ids` carries rank 0's unique id to rank 1. */
static int processCycle(int rank, int ids[2]) {
  ncclUniqueId id;
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    if (write(ids[1], &id, sizeof id) != (ssize_t)sizeof id) return 1;
  } else if (read(ids[0], &id, sizeof id) != (ssize_t)sizeof id) {
    return 1;
  }
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return 1;
  return ncclCommDestroy(comm) != ncclSuccess;
}

/* Runs warm-up and measured cycles of one side; returns 0 when within the bound. */
static int measure(const char* who, int warmup, int cycles, double bound, int (*cycle)(void*),
                   void* arg) {
  for (int i = 0; i < warmup; ++i)
    if (cycle(arg)) return fprintf(stderr, "%s: warm-up cycle %d failed\n", who, i), 1;
  const long before = residentBytes();
  for (int i = 0; i < cycles; ++i)
    if (cycle(arg)) return fprintf(stderr, "%s: cycle %d failed\n", who, i), 1;
  const long after = residentBytes();
  if (before < 0 || after < 0) return fprintf(stderr, "%s: cannot read statm\n", who), 1;
  const double perCycle = (double)(after - before) / cycles;
  printf(
      "%s: resident %ld KiB after %d warm-up cycles, %ld KiB after %d more: %.1f bytes per "
      "cycle (bound %.1f)\n",
      who, before / 1024, warmup, after / 1024, cycles, perCycle, bound);
  return perCycle > bound;
}

static int nranksArg;
static int threadCycleArg(void* unused) {
  (void)unused;
  return threadCycle(nranksArg);
}

struct ProcessArg {
  int rank;
  int* ids;
};
static int processCycleArg(void* p) {
  struct ProcessArg* a = p;
  return processCycle(a->rank, a->ids);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "threads";
  const int warmup = argc > 2 ? atoi(argv[2]) : 200;
  const int cycles = argc > 3 ? atoi(argv[3]) : 2000;
  const double bound = argc > 4 ? atof(argv[4]) : 16.0;
  nranksArg = argc > 5 ? atoi(argv[5]) : 4;
  if (cycles < 1 || warmup < 0 || nranksArg < 1 || nranksArg > kMaxRanks) {
    fprintf(stderr, "usage: %s threads|procs [warmup] [cycles] [bound] [nranks 1..%d]\n", argv[0],
            kMaxRanks);
    return 2;
  }
  if (strcmp(mode, "threads") == 0) {
    char who[64];
    snprintf(who, sizeof who, "ncclCommInitAll(%d)", nranksArg);
    return measure(who, warmup, cycles, bound, threadCycleArg, NULL);
  }
  if (strcmp(mode, "procs") != 0) return fprintf(stderr, "unknown mode %s\n", mode), 2;
  int ids[2];
  if (pipe(ids) != 0) return 2;
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 2;
  struct ProcessArg arg = {child == 0 ? 1 : 0, ids};
  close(child == 0 ? ids[1] : ids[0]); /* rank 1 sees the end of the pipe if rank 0 stops */
  const int bad = measure(child == 0 ? "process rank 1" : "process rank 0", warmup, cycles, bound,
                          processCycleArg, &arg);
  fflush(stdout);
  if (child == 0) _exit(bad);
  close(ids[1]);
  int code = 0;
  waitChildren(&child, 1, kChildExitMs, &code);
  return bad || code != 0;
}
