/* A rank aborted during a large collective frees its buffers the moment its call returns, as a
 * program would. On the local transport peers read large messages in place from the sender's
 * buffer, and store into a receiver's buffer where it offered it (a landing): the aborted rank's
 * call must not return while a peer still reads or writes there. Malloc's mmap threshold is
 * lowered so that a freed buffer is unmapped at once, and a late read or write crashes.
 * Ranks are threads of this process (ncclCommInitAll); every round aborts one rank at a random
 * moment of the call from a second thread; rounds cycle through an allreduce, a
 * broadcast and an allgather (both land). Usage: abort_frees_buffers ROUNDS [RANKS]. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nccl.h"
#include "weft/weft.h"

enum { kMaxRanks = 8 };
static const size_t kCount = 1 << 19; /* floats: 2 MiB, sent by reference in large slices */

struct Rank {
  ncclComm_t comm;
  int index;
  int victim;
  useconds_t abortAfter;
  int coll; /* 0 allreduce, 1 broadcast from rank 0, 2 allgather */
  int nranks;
  ncclResult_t result;
};

static ncclResult_t runCollective(struct Rank* r, float* send, float* recv) {
  switch (r->coll) {
    case 0:
      return ncclAllReduce(send, recv, kCount, ncclFloat, ncclSum, r->comm, NULL);
    case 1:
      return ncclBroadcast(send, recv, kCount, ncclFloat, 0, r->comm, NULL);
    default:
      return ncclAllGather(send, recv, kCount / r->nranks, ncclFloat, r->comm, NULL);
  }
}

static void* aborter(void* arg) {
  struct Rank* r = arg;
  usleep(r->abortAfter);
  ncclCommAbort(r->comm);
  return NULL;
}

static void* rankMain(void* arg) {
  struct Rank* r = arg;
  float* send = malloc(kCount * sizeof(float));
  float* recv = malloc(kCount * sizeof(float));
  if (!send || !recv) {
    free(send);
    free(recv);
    r->result = ncclSystemError;
    return NULL;
  }
  for (size_t i = 0; i < kCount; ++i) send[i] = recv[i] = (float)(r->index + 1);
  pthread_t thread;
  if (r->victim) pthread_create(&thread, NULL, aborter, r);
  r->result = runCollective(r, send, recv);
  /* At once: a peer still reading either buffer, or storing into recv, would fault. */
  free(send);
  free(recv);
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
      ranks[i] = (struct Rank){comms[i],  i, i == victim, (useconds_t)(rand() % 400),
                               round % 3, n, ncclSuccess};
      pthread_create(&threads[i], NULL, rankMain, &ranks[i]);
    }
    for (int i = 0; i < n; ++i) pthread_join(threads[i], NULL);
    aborted += ranks[victim].result != ncclSuccess;
    for (int i = 0; i < n; ++i)
      if (i != victim) ncclCommAbort(comms[i]);
  }
  printf(
      "%d rounds of %d ranks, %d aborts landed during the call, %llu slices stored into a "
      "receiver's buffer: no rank touched freed memory\n",
      rounds, n, aborted, (unsigned long long)weftLandedSlices());
  return 0;
}
