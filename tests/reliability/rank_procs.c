#include "rank_procs.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double nowSeconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double nowMs(void) { return nowSeconds() * 1e3; }

int writeAll(int fd, const void* data, size_t bytes) {
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

int readAll(int fd, void* data, size_t bytes) {
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

pid_t forkRank(int (*rankMain)(int rank, void* arg), int rank, void* arg) {
  fflush(NULL); /* nothing buffered is printed twice */
  pid_t pid = fork();
  if (pid == 0) _exit(rankMain(rank, arg));
  return pid;
}

int waitChildren(const pid_t* pids, int n, double timeoutMs, int* codes) {
  int left = 0;
  for (int r = 0; r < n; ++r) {
    codes[r] = pids[r] > 0 ? kChildHung : -1;
    left += pids[r] > 0;
  }
  const double deadline = nowMs() + timeoutMs;
  while (left > 0 && nowMs() < deadline) {
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (pids[r] <= 0 || codes[r] != kChildHung) continue;
      const pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got == 0) continue;
      codes[r] = got != pids[r]      ? -1
                 : WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + WTERMSIG(status);
      --left;
    }
    if (left > 0) usleep(2000);
  }
  for (int r = 0; r < n && left > 0; ++r) {
    if (pids[r] <= 0 || codes[r] != kChildHung) continue;
    kill(pids[r], SIGKILL);
    waitpid(pids[r], NULL, 0);
    fprintf(stderr, "rank %d (pid %d) still running after %.0f ms: killed\n", r, (int)pids[r],
            timeoutMs);
  }
  return left;
}

void fillRankPattern(float* buf, size_t count, int rank, int round) {
  for (size_t k = 0; k < count; ++k) buf[k] = (float)(rank + 1) * (float)(k % 7 + round % 3);
}

int checkRankPatternSum(const float* buf, size_t count, int nranks, int round, const char* who) {
  const float rankSum = (float)(nranks * (nranks + 1) / 2);
  for (size_t k = 0; k < count; ++k) {
    const float want = rankSum * (float)(k % 7 + round % 3);
    if (buf[k] != want) {
      fprintf(stderr, "%s, round %d: element %zu is %g, expected %g\n", who, round, k, buf[k],
              want);
      return 1;
    }
  }
  return 0;
}

int allreduceChecked(ncclComm_t comm, int rank, int nranks, int round, float* buf, size_t count) {
  char who[32];
  snprintf(who, sizeof(who), "rank %d", rank);
  fillRankPattern(buf, count, rank, round);
  if (ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
    fprintf(stderr, "%s, round %d: allreduce failed: %s\n", who, round, ncclGetLastError(comm));
    return 1;
  }
  return checkRankPatternSum(buf, count, nranks, round, who);
}
