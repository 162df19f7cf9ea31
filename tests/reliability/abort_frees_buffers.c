/* A rank aborted during a large allreduce frees its buffers the moment its call returns, as a
 * program would. On the local transport peers read large messages in place from the sender's
 * buffer: the aborted rank's call must not return while a peer still reads there. Malloc's mmap
 * threshold is lowered so that a freed buffer is unmapped at once, and a late read crashes.
 * Ranks are threads of this process (ncclCommInitAll); every round aborts one rank at a random
 * moment of the call from a second thread. Usage: abort_frees_buffers ROUNDS [RANKS]. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nccl.h"

enum { kMaxRanks = 8 };
static const size_t kCount = 1 << 19; /* floats: 2 MiB, sent by reference in large slices */

struct Rank {
  ncclComm_t comm;
  int index;
  int victim;
  useconds_t abortAfter;
  ncclResult_t result;
};

static void* aborter(void* arg) {
  struct Rank* r = arg;
  usleep(r->abortAfter);
  ncclCommAbort(r->comm);
  return NULL;
}

static void* rankMain(void* arg) {
  struct Rank* r = arg;
  float* buf = malloc(kCount * sizeof(float));
  if (!buf) {
    r->result = ncclSystemError;
    return NULL;
  }
  for (size_t i = 0; i < kCount; ++i) buf[i] = (float)(r->index + 1);
  pthread_t thread;
  if (r->victim) pthread_create(&thread, NULL, aborter, r);
  r->result = ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, r->comm, NULL);
  free(buf); /* at once: a peer still reading it would fault */
  if (r->victim) pthread_join(thread, NULL);
  return NULL;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 20;
  const int n = argc > 2 ? atoi(argv[2]) : 4;
  if (n < 2 || n > kMaxRanks) return 2;
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  srand(12345);
  int aborted = 0;
  for (int round = 0; round < rounds; ++round) {
    ncclComm_t comms[kMaxRanks];
    if (ncclCommInitAll(comms, n, NULL) != ncclSuccess) {
      fprintf(stderr, "round %d: ncclCommInitAll failed\n", round);
      return 1;
    }
    struct Rank ranks[kMaxRanks];
    pthread_t threads[kMaxRanks];
    const int victim = 1 + rand() % (n - 1);
    for (int i = 0; i < n; ++i) {
      ranks[i] = (struct Rank){comms[i], i, i == victim, (useconds_t)(rand() % 400), ncclSuccess};
      pthread_create(&threads[i], NULL, rankMain, &ranks[i]);
    }
    for (int i = 0; i < n; ++i) pthread_join(threads[i], NULL);
    aborted += ranks[victim].result != ncclSuccess;
    for (int i = 0; i < n; ++i)
      if (i != victim) ncclCommAbort(comms[i]);
  }
  printf("%d rounds of %d ranks, %d aborts landed during the call: no rank read freed memory\n",
         rounds, n, aborted);
  return 0;
}
