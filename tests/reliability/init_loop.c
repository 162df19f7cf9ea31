/* Communicator setup and teardown in a loop, the way a job scheduler or a test suite churns
 * through them: each iteration creates a fresh id, initialises `ranks` ranks, runs one allreduce
 * whose result is checked, and destroys the communicators. Every init must succeed: a late
 * connection from an earlier iteration, a reused port or a root that has not yet let go of the
 * previous rendezvous must never make an init fail or hang.
 * Usage: init_loop threads|processes [iterations] [ranks]
 *   threads:   ncclCommInitAll(ranks) in this process;
 *   processes: `ranks` forked processes that live for the whole loop; rank 0 creates each
 *              iteration's id and hands it to the others through a pipe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"
#include "rank_procs.h"

/* How long rank 0 waits for the other rank processes to leave once its loop ended. */
enum { kMaxRanks = 16, kCount = 1024, kExitTimeoutMs = 60000 };

static int runThreads(int iterations, int ranks) {
  ncclComm_t comms[kMaxRanks];
  float* bufs[kMaxRanks];
  for (int r = 0; r < ranks; ++r)
    if (!(bufs[r] = malloc(kCount * sizeof(float)))) return 1;
  for (int i = 0; i < iterations; ++i) {
    if (ncclCommInitAll(comms, ranks, NULL) != ncclSuccess) {
      fprintf(stderr, "iteration %d: ncclCommInitAll failed: %s\n", i, ncclGetLastError(NULL));
      return 1;
    }
    /* One allreduce over all ranks from one thread: a group call. */
    for (int r = 0; r < ranks; ++r) fillRankPattern(bufs[r], kCount, r, i);
    if (ncclGroupStart() != ncclSuccess) return 1;
    for (int r = 0; r < ranks; ++r)
      if (ncclAllReduce(bufs[r], bufs[r], kCount, ncclFloat, ncclSum, comms[r], NULL) !=
          ncclSuccess) {
        fprintf(stderr, "iteration %d: allreduce on rank %d failed\n", i, r);
        return 1;
      }
    if (ncclGroupEnd() != ncclSuccess) {
      fprintf(stderr, "iteration %d: the grouped allreduce failed: %s\n", i,
              ncclGetLastError(NULL));
      return 1;
    }
    for (int r = 0; r < ranks; ++r) {
      char who[32];
      snprintf(who, sizeof(who), "rank %d", r);
      if (checkRankPatternSum(bufs[r], kCount, ranks, i, who)) return 1;
    }
    for (int r = 0; r < ranks; ++r)
      if (ncclCommDestroy(comms[r]) != ncclSuccess) {
        fprintf(stderr, "iteration %d: ncclCommDestroy of rank %d failed\n", i, r);
        return 1;
      }
  }
  for (int r = 0; r < ranks; ++r) free(bufs[r]);
  return 0;
}

struct RankPipes {
  int ranks, iterations;
  int idPipes[kMaxRanks][2]; /* rank 0 -> rank r: each iteration's id */
  int donePipe[2];           /* every rank -> rank 0: a byte per iteration */
};

/* One rank process: per iteration, receive the id, init, allreduce, destroy, report a byte. */
static int rankProcess(int rank, void* arg) {
  const struct RankPipes* p = arg;
  const int ranks = p->ranks, iterations = p->iterations;
  const int idFd = p->idPipes[rank][0], doneFd = p->donePipe[1];
  close(p->idPipes[rank][1]);
  close(p->donePipe[0]);
  float* buf = malloc(kCount * sizeof(float));
  if (!buf) return 2;
  for (int i = 0; i < iterations; ++i) {
    ncclUniqueId id;
    if (readAll(idFd, &id, sizeof(id))) return 3;
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, ranks, id, rank) != ncclSuccess) {
      fprintf(stderr, "iteration %d rank %d: ncclCommInitRank failed: %s\n", i, rank,
              ncclGetLastError(NULL));
      return 4;
    }
    if (allreduceChecked(comm, rank, ranks, i, buf, kCount)) return 5;
    if (ncclCommDestroy(comm) != ncclSuccess) return 6;
    if (writeAll(doneFd, "x", 1)) return 7;
  }
  free(buf);
  return 0;
}

static int runProcesses(int iterations, int ranks) {
  struct RankPipes p = {.ranks = ranks, .iterations = iterations};
  int(*idPipes)[2] = p.idPipes;
  const int* donePipe = p.donePipe;
  pid_t children[kMaxRanks] = {0};
  if (pipe(p.donePipe) != 0) return 1;
  for (int r = 1; r < ranks; ++r) {
    if (pipe(idPipes[r]) != 0) return 1;
    children[r] = forkRank(rankProcess, r, &p);
    if (children[r] < 0) return 1;
    close(idPipes[r][0]);
  }
  close(donePipe[1]);
  float* buf = malloc(kCount * sizeof(float));
  int failed = buf == NULL;
  for (int i = 0; i < iterations && !failed; ++i) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      fprintf(stderr, "iteration %d: ncclGetUniqueId failed\n", i);
      failed = 1;
      break;
    }
    for (int r = 1; r < ranks; ++r)
      if (writeAll(idPipes[r][1], &id, sizeof(id))) failed = 1;
    ncclComm_t comm;
    if (failed) break;
    if (ncclCommInitRank(&comm, ranks, id, 0) != ncclSuccess) {
      fprintf(stderr, "iteration %d rank 0: ncclCommInitRank failed: %s\n", i,
              ncclGetLastError(NULL));
      failed = 1;
      break;
    }
    failed = allreduceChecked(comm, 0, ranks, i, buf, kCount);
    if (ncclCommDestroy(comm) != ncclSuccess) failed = 1;
    /* Iterations stay in lock step, as in a scheduler that waits for a job before the next. */
    for (int r = 1; r < ranks && !failed; ++r) {
      char done;
      if (readAll(donePipe[0], &done, 1)) {
        fprintf(stderr, "iteration %d: a rank process died\n", i);
        failed = 1;
      }
    }
  }
  free(buf);
  for (int r = 1; r < ranks; ++r) close(idPipes[r][1]); /* ends children waiting for an id */
  int codes[kMaxRanks];
  waitChildren(children, ranks, kExitTimeoutMs, codes);
  for (int r = 1; r < ranks; ++r) {
    if (codes[r] != 0 && !failed) fprintf(stderr, "rank %d process ended with %d\n", r, codes[r]);
    failed |= codes[r] != 0;
  }
  return failed;
}

int main(int argc, char** argv) {
  if (argc < 2 || (strcmp(argv[1], "threads") != 0 && strcmp(argv[1], "processes") != 0)) {
    fprintf(stderr, "usage: %s threads|processes [iterations] [ranks]\n", argv[0]);
    return 2;
  }
  const int threads = strcmp(argv[1], "threads") == 0;
  const int iterations = argc > 2 ? atoi(argv[2]) : 100;
  const int ranks = argc > 3 ? atoi(argv[3]) : 4;
  if (iterations < 1 || ranks < 2 || ranks > kMaxRanks) {
    fprintf(stderr, "iterations must be >= 1 and ranks in 2..%d\n", kMaxRanks);
    return 2;
  }
  double start = nowSeconds();
  int failed = threads ? runThreads(iterations, ranks) : runProcesses(iterations, ranks);
  if (failed) return 1;
  printf("%d iterations of init + allreduce + destroy of %d ranks (%s) in %.1f s\n", iterations,
         ranks, argv[1], nowSeconds() - start);
  return 0;
}
