/* How fast and how clearly a rank's failure reaches the others. Ranks are threads of this
 * process (the transport is the environment's: local, or shm / tcp with NCCL_P2P_DISABLE /
 * NCCL_SHM_DISABLE). In each round every rank joins, some rounds run a first allreduce together
 * (links open) and some do not (rank 1 opens its link to rank 0, rank 0 never does); then rank
 * 0's communicator is aborted by another thread while the others run an allreduce it never
 * calls. Every survivor must fail well before WEFT_TIMEOUT_MS (set it high), and its error must
 * name rank 0, also where the survivor waited only on another survivor (the cause travels with
 * the poison). Rounds end with the survivors' ncclCommAbort while the victim's links are torn
 * down, which over tcp is where a worker thread once rang a freed doorbell.
 * Usage: fault_propagation [rounds] [nranks] [limit_ms]. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"
#include "rank_procs.h"

#define MAX_RANKS 8
#define COUNT 1024

struct Rank {
  int rank, nranks, round;
  ncclUniqueId id;
  pthread_barrier_t* joined;
  ncclResult_t initRc, rc;
  double ms;
  char error[512];
};

static void* runRank(void* arg) {
  struct Rank* r = arg;
  float* buf = calloc(COUNT, sizeof(float));
  ncclComm_t comm = NULL;
  r->initRc = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  pthread_barrier_wait(r->joined);
  if (r->initRc != ncclSuccess) {
    pthread_barrier_wait(r->joined);
    free(buf);
    return NULL;
  }
  const int warm = r->round % 2 == 0;
  if (warm) r->rc = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL);
  pthread_barrier_wait(r->joined);
  if (r->rank == 0) {
    usleep(20000); /* the others are waiting in their allreduce by now */
    r->rc = ncclCommAbort(comm);
    free(buf);
    return NULL;
  }
  const double start = nowMs();
  r->rc = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL);
  r->ms = nowMs() - start;
  snprintf(r->error, sizeof(r->error), "%s", ncclGetLastError(comm));
  ncclCommAbort(comm);
  free(buf);
  return NULL;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 10;
  const int nranks = argc > 2 ? atoi(argv[2]) : 4;
  const double limitMs = argc > 3 ? atof(argv[3]) : 5000;
  if (nranks < 3 || nranks > MAX_RANKS) {
    fprintf(stderr, "nranks must be 3..%d\n", MAX_RANKS);
    return 2;
  }
  int failures = 0;
  double slowest = 0;
  for (int round = 0; round < rounds; ++round) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      fprintf(stderr, "round %d: ncclGetUniqueId failed\n", round);
      return 1;
    }
    pthread_barrier_t joined;
    pthread_barrier_init(&joined, NULL, (unsigned)nranks);
    struct Rank ranks[MAX_RANKS];
    pthread_t threads[MAX_RANKS];
    for (int r = 0; r < nranks; ++r) {
      memset(&ranks[r], 0, sizeof(ranks[r]));
      ranks[r].rank = r;
      ranks[r].nranks = nranks;
      ranks[r].round = round;
      ranks[r].id = id;
      ranks[r].joined = &joined;
      pthread_create(&threads[r], NULL, runRank, &ranks[r]);
    }
    for (int r = 0; r < nranks; ++r) pthread_join(threads[r], NULL);
    pthread_barrier_destroy(&joined);
    for (int r = 0; r < nranks; ++r) {
      const struct Rank* x = &ranks[r];
      if (x->initRc != ncclSuccess) {
        fprintf(stderr, "round %d rank %d: init failed\n", round, r);
        ++failures;
        continue;
      }
      if (r == 0) {
        if (x->rc != ncclSuccess)
          fprintf(stderr, "round %d: ncclCommAbort failed\n", round), ++failures;
        continue;
      }
      if (x->ms > slowest) slowest = x->ms;
      if (x->rc == ncclSuccess) {
        fprintf(stderr, "round %d rank %d: the allreduce without rank 0 succeeded\n", round, r);
        ++failures;
      } else if (x->ms > limitMs) {
        fprintf(stderr, "round %d rank %d: learnt of the abort after %.0f ms (limit %.0f): %s\n",
                round, r, x->ms, limitMs, x->error);
        ++failures;
      } else if (!strstr(x->error, "rank 0 ")) {
        fprintf(stderr, "round %d rank %d: the error does not name rank 0: %s\n", round, r,
                x->error);
        ++failures;
      }
    }
  }
  printf("fault_propagation: %d rounds of %d ranks, slowest survivor %.0f ms, %d problems\n",
         rounds, nranks, slowest, failures);
  return failures == 0 ? 0 : 1;
}
