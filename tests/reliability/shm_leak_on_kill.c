/* Nothing Weft puts in /dev/shm may outlive a job one of whose processes is killed. Each run forks
 * `nranks` processes that init a communicator over shm and run allreduces of several sizes, then
 * SIGKILLs one of them after a random delay (during init, during the collectives, or after).
 * The survivors must leave (with an error or not) within the deadline and without crashing, and
 * afterwards /dev/shm must hold no segment named with any of the run's process ids. The delays
 * are drawn over the length of a first run that nobody kills, so that every phase gets its kills
 * whatever the machine's speed.
 * Usage: shm_leak_on_kill [runs] [nranks] [seed] */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "rank_procs.h"

enum { kMaxRanks = 8, kIterations = 400, kDeadlineMs = 60000 };
enum Phase { kStarting, kInitDone, kCollectivesDone, kExited };
static const char* const kPhaseNames[] = {"init", "collectives", "destroy", "exited"};

/* One rank: init, allreduces of 8 B to 4 MiB, destroy; on an error, abort and leave. */
static void runRank(ncclUniqueId id, int nranks, int rank, volatile int* phase) {
  static const size_t counts[] = {2, 1024, 65536, 1048576};
  float* buf = calloc(1048576, sizeof(float));
  ncclComm_t comm;
  if (!buf || ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) _exit(2);
  *phase = kInitDone;
  for (int i = 0; i < kIterations; ++i) {
    size_t count = counts[i % 4];
    if (ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
      ncclCommAbort(comm);
      _exit(3);
    }
  }
  *phase = kCollectivesDone;
  _exit(ncclCommDestroy(comm) == ncclSuccess ? 0 : 4);
}

/* Whether the /dev/shm entry `name` carries ".pid<pid>" as one of its dot-separated fields. */
static int namesPid(const char* name, pid_t pid) {
  char field[32];
  snprintf(field, sizeof(field), ".pid%d", (int)pid);
  for (const char* at = strstr(name, field); at; at = strstr(at + 1, field)) {
    char next = at[strlen(field)];
    if (next == '\0' || next == '.') return 1;
  }
  return 0;
}

/* Prints and counts the weft segments in /dev/shm that name any of `pids`. */
static int leftovers(const pid_t* pids, int n, int run) {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return 0;
  int found = 0;
  for (struct dirent* e; (e = readdir(dir));) {
    if (strncmp(e->d_name, "weft.", 5) != 0) continue;
    for (int r = 0; r < n; ++r)
      if (namesPid(e->d_name, pids[r])) {
        fprintf(stderr, "run %d: /dev/shm/%s outlived the job\n", run, e->d_name);
        ++found;
        break;
      }
  }
  closedir(dir);
  return found;
}

/* Waits for the job's processes (an entry <= 0: one reaped already) until the deadline, which
 * kills and counts the ones still running then. A survivor that died of a signal (a crash)
 * counts too. */
static int reap(const pid_t* pids, int n, pid_t victim, int run) {
  int codes[kMaxRanks];
  int bad = waitChildren(pids, n, kDeadlineMs, codes);
  for (int r = 0; r < n; ++r)
    if (pids[r] > 0 && pids[r] != victim && codes[r] > 128) {
      fprintf(stderr, "run %d: pid %d died of signal %d\n", run, (int)pids[r], codes[r] - 128);
      ++bad;
    }
  return bad;
}

int main(int argc, char** argv) {
  const int runs = argc > 1 ? atoi(argv[1]) : 20;
  const int nranks = argc > 2 ? atoi(argv[2]) : 2;
  const unsigned seed = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : (unsigned)time(NULL);
  if (nranks < 2 || nranks > kMaxRanks || runs < 1) {
    fprintf(stderr, "usage: %s [runs] [nranks 2..%d] [seed]\n", argv[0], kMaxRanks);
    return 2;
  }
  srand(seed);
  printf("seed %u\n", seed);
  volatile int* phase = mmap(NULL, sizeof(int) * kMaxRanks, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (phase == MAP_FAILED) return 2;
  int killedIn[4] = {0}, failures = 0, leaked = 0, maxDelayMs = 0;
  for (int run = -1; run < runs; ++run) { /* run -1: nobody is killed; it times a whole job */
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) return 2;
    pid_t pids[kMaxRanks];
    for (int r = 0; r < nranks; ++r) {
      phase[r] = kStarting;
      pids[r] = fork();
      if (pids[r] < 0) return 2;
      if (pids[r] == 0) runRank(id, nranks, r, &phase[r]);
    }
    if (run < 0) {
      const double start = nowMs();
      failures += reap(pids, nranks, -1, run);
      leaked += leftovers(pids, nranks, run);
      maxDelayMs = (int)((nowMs() - start) * 1.25) + 1;
      continue;
    }
    const int victim = rand() % nranks;
    usleep((useconds_t)(rand() % (maxDelayMs + 1)) * 1000);
    int status = 0;
    const int at =
        waitpid(pids[victim], &status, WNOHANG) == pids[victim] ? kExited : phase[victim];
    if (at != kExited) kill(pids[victim], SIGKILL);
    ++killedIn[at];
    pid_t waited[kMaxRanks];
    memcpy(waited, pids, sizeof(pid_t) * (size_t)nranks);
    if (at == kExited) waited[victim] = 0; /* reaped above */
    failures += reap(waited, nranks, pids[victim], run);
    leaked += leftovers(pids, nranks, run);
  }
  printf("%d runs of %d ranks, one killed within %d ms: in %s %d, %s %d, %s %d, %s %d\n", runs,
         nranks, maxDelayMs, kPhaseNames[0], killedIn[0], kPhaseNames[1], killedIn[1],
         kPhaseNames[2], killedIn[2], kPhaseNames[3], killedIn[3]);
  printf("segments left in /dev/shm: %d; survivors that hung or crashed: %d\n", leaked, failures);
  return leaked == 0 && failures == 0 ? 0 : 1;
}
