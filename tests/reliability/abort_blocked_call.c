/* ncclCommAbort from another thread while a collective is blocked, as a watchdog does it: rank 0
 * of two processes blocks in ncclAllReduce (rank 1 never calls it), and a second thread of rank 0
 * aborts the communicator after a while. The blocked call must return an error, the abort
 * ncclSuccess, and nothing may crash. Usage: abort_blocked_call [iterations] [count]. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "rank_procs.h"

/* How long rank 1 may take to leave once told to. */
enum { kChildExitMs = 30000 };

struct Aborter {
  ncclComm_t comm;
  useconds_t delayUs;
  ncclResult_t result;
};

static void* abortLater(void* arg) {
  struct Aborter* a = arg;
  usleep(a->delayUs);
  a->result = ncclCommAbort(a->comm);
  return NULL;
}

static int fail(int iteration, const char* what) {
  fprintf(stderr, "iteration %d: %s\n", iteration, what);
  return 1;
}

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? atoi(argv[1]) : 20;
  const size_t count = argc > 2 ? strtoull(argv[2], NULL, 0) : 2;
  srand((unsigned)time(NULL));
  float* buf = calloc(count, sizeof(float));
  if (!buf) return fail(0, "out of memory");
  for (int i = 0; i < iterations; ++i) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) return fail(i, "ncclGetUniqueId failed");
    int go[2];
    if (pipe(go) != 0) return fail(i, "pipe failed");
    pid_t child = fork();
    if (child < 0) return fail(i, "fork failed");
    if (child == 0) { /* rank 1: joins, never calls the collective, leaves when rank 0 is done */
      close(go[1]);   /* so that rank 0's exit (even a failed one) ends the read below */
      ncclComm_t comm;
      if (ncclCommInitRank(&comm, 2, id, 1) != ncclSuccess) _exit(3);
      char done;
      if (read(go[0], &done, 1) != 1) _exit(4);
      ncclCommAbort(comm);
      _exit(0);
    }
    close(go[0]);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, 2, id, 0) != ncclSuccess) return fail(i, "init failed");
    struct Aborter aborter = {comm, (useconds_t)(50000 + rand() % 250000), ncclInternalError};
    pthread_t thread;
    if (pthread_create(&thread, NULL, abortLater, &aborter) != 0) return fail(i, "no thread");
    const ncclResult_t blocked = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
    pthread_join(thread, NULL);
    if (blocked == ncclSuccess) return fail(i, "the blocked allreduce succeeded");
    if (aborter.result != ncclSuccess) return fail(i, "ncclCommAbort failed");
    if (write(go[1], "x", 1) != 1) return fail(i, "write failed");
    int code = 0;
    waitChildren(&child, 1, kChildExitMs, &code);
    if (code != 0) return fail(i, "rank 1 did not exit cleanly");
    close(go[1]);
  }
  free(buf);
  printf("%d aborts of a blocked allreduce of %zu floats: every call returned an error\n",
         iterations, count);
  return 0;
}
