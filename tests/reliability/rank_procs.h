/* What the reliability programs (C programs against libnccl.so.2) share: the monotonic clock,
 * whole reads and writes on pipes, rank processes forked and waited for with a deadline, and an
 * allreduce whose result is checked. */
#ifndef WEFT_TESTS_RELIABILITY_RANK_PROCS_H
#define WEFT_TESTS_RELIABILITY_RANK_PROCS_H
#include <stddef.h>
#include <sys/types.h>

#include "nccl.h"

/* CLOCK_MONOTONIC, in seconds and in milliseconds. */
double nowSeconds(void);
double nowMs(void);

/* Writes or reads exactly `bytes`, through short transfers and EINTR: 0 on success, 1 when the
 * pipe failed or its other end closed. */
int writeAll(int fd, const void* data, size_t bytes);
int readAll(int fd, void* data, size_t bytes);

/* Forks a rank process that runs rankMain(rank, arg) and _exits with what it returns. Returns
 * the child's pid, or -1 when fork failed. */
pid_t forkRank(int (*rankMain)(int rank, void* arg), int rank, void* arg);

/* The code waitChildren gives a child still running at the deadline (timeout(1)'s status). */
enum { kChildHung = 124 };

/* Waits for the `n` children of `pids` (an entry <= 0 is skipped, its code -1) for up to
 * `timeoutMs`: codes[r] is child r's exit status, 128 + the signal that ended it, or kChildHung
 * for one still running at the deadline, which is then killed (SIGKILL), reaped and named on
 * stderr, so that a hung rank fails the test instead of hanging it. Returns how many hung. */
int waitChildren(const pid_t* pids, int n, double timeoutMs, int* codes);

/* Rank `rank`'s input in round `round`: element k is (rank + 1) * (k % 7 + round % 3), small
 * integers whose sums over ranks are exact in float. */
void fillRankPattern(float* buf, size_t count, int rank, int round);

/* 0 when buf holds the sum over `nranks` ranks of fillRankPattern in `round`; else names the first
 * wrong element on stderr (`who` says whose buffer it is) and returns 1. */
int checkRankPatternSum(const float* buf, size_t count, int nranks, int round, const char* who);

/* Fills buf with this rank's pattern, allreduces it in place (sum, NULL stream) and checks the
 * result: 0 when right, else 1 after saying what went wrong on stderr. */
int allreduceChecked(ncclComm_t comm, int rank, int nranks, int round, float* buf, size_t count);

#endif
