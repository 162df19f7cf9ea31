/* Communicator setup and teardown in a loop, the way a job scheduler or a test suite churns
 * through them: each iteration creates a fresh id, initialises `ranks` ranks, runs one allreduce
 * whose result is checked, and destroys the communicators. Every init must succeed: a late
 * connection from an earlier iteration, a reused port or a root that has not yet let go of the
 * previous rendezvous must never make an init fail or hang.
 * Usage: init_loop threads|processes [iterations] [ranks]
 *   threads:   ncclCommInitAll(ranks) in this process;
 *   processes: `ranks` forked processes that live for the whole loop; rank 0 creates each
 *              iteration's id and hands it to the others through a pipe. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

enum { kMaxRanks = 16, kCount = 1024 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Fills with this rank's pattern, allreduces, and checks the sum of every rank's pattern. */
static int allreduceChecked(ncclComm_t comm, int rank, int ranks, int iteration, float* buf) {
  for (int k = 0; k < kCount; ++k) buf[k] = (float)(rank + 1) * (float)(k % 7 + iteration % 3);
  if (ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
    fprintf(stderr, "iteration %d rank %d: allreduce failed: %s\n", iteration, rank,
            ncclGetLastError(comm));
    return 1;
  }
  const float rankSum = (float)(ranks * (ranks + 1) / 2);
  for (int k = 0; k < kCount; ++k) {
    float want = rankSum * (float)(k % 7 + iteration % 3);
    if (buf[k] != want) {
      fprintf(stderr, "iteration %d rank %d: element %d is %g, expected %g\n", iteration, rank, k,
              buf[k], want);
      return 1;
    }
  }
  return 0;
}

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
    for (int r = 0; r < ranks; ++r)
      for (int k = 0; k < kCount; ++k) bufs[r][k] = (float)(r + 1) * (float)(k % 7 + i % 3);
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
    const float rankSum = (float)(ranks * (ranks + 1) / 2);
    for (int r = 0; r < ranks; ++r)
      for (int k = 0; k < kCount; ++k)
        if (bufs[r][k] != rankSum * (float)(k % 7 + i % 3)) {
          fprintf(stderr, "iteration %d: rank %d element %d is %g\n", i, r, k, bufs[r][k]);
          return 1;
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

static int writeAll(int fd, const void* data, size_t bytes) {
  const char* p = data;
  while (bytes > 0) {
    ssize_t n = write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 1;
    p += n;
    bytes -= (size_t)n;
  }
  return 0;
}

static int readAll(int fd, void* data, size_t bytes) {
  char* p = data;
  while (bytes > 0) {
    ssize_t n = read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 1;
    p += n;
    bytes -= (size_t)n;
  }
  return 0;
}

/* One rank process: per iteration, receive the id, init, allreduce, destroy, report a byte. */
static int rankProcess(int rank, int ranks, int iterations, int idFd, int doneFd) {
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
    if (allreduceChecked(comm, rank, ranks, i, buf)) return 5;
    if (ncclCommDestroy(comm) != ncclSuccess) return 6;
    if (writeAll(doneFd, "x", 1)) return 7;
  }
  free(buf);
  return 0;
}

static int runProcesses(int iterations, int ranks) {
  int idPipes[kMaxRanks][2];
  int donePipe[2];
  pid_t children[kMaxRanks];
  if (pipe(donePipe) != 0) return 1;
  for (int r = 1; r < ranks; ++r) {
    if (pipe(idPipes[r]) != 0) return 1;
    children[r] = fork();
    if (children[r] < 0) return 1;
    if (children[r] == 0) {
      close(idPipes[r][1]);
      close(donePipe[0]);
      _exit(rankProcess(r, ranks, iterations, idPipes[r][0], donePipe[1]));
    }
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
    failed = allreduceChecked(comm, 0, ranks, i, buf);
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
  for (int r = 1; r < ranks; ++r) {
    int status = 0;
    if (waitpid(children[r], &status, 0) != children[r] || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      if (!failed) fprintf(stderr, "rank %d process ended with status 0x%x\n", r, (unsigned)status);
      failed = 1;
    }
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
  double start = now();
  int failed = threads ? runThreads(iterations, ranks) : runProcesses(iterations, ranks);
  if (failed) return 1;
  printf("%d iterations of init + allreduce + destroy of %d ranks (%s) in %.1f s\n", iterations,
         ranks, argv[1], now() - start);
  return 0;
}
