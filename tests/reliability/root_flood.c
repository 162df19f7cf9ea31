/* Strangers holding idle connections to a job's ports must not stop the job. Two rank processes
 * and this process, which plays the stranger:
 *   1. rank 0 starts the root (NCCL_COMM_ID names its port); the stranger opens `flood` idle
 *      connections to it; then both ranks' ncclCommInitRank must succeed;
 *   2. each rank reports its listening sockets (the bootstrap listen socket and the tcp
 *      transport's, found through /proc/self/fd and /proc/self/net/tcp{,6}); while both run
 *      checked allreduces, the stranger opens `flood` idle connections to every one of them;
 *   3. with those connections still held, a second communicator is created and used (its tcp
 *      links connect through the flooded tcp listen socket).
 * Usage: root_flood [flood] (run it with NCCL_SHM_DISABLE=1 for tcp). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "rank_procs.h"

/* kExitTimeoutMs: how long the stranger waits for the ranks to leave once the flood is done. */
enum { kRanks = 2, kCount = 4096, kMaxPorts = 16, kAfterFlood = 20, kExitTimeoutMs = 60000 };

/* Child -> parent messages; each fits one atomic pipe write. */
enum Kind { kRootReady = 1, kListening = 2, kPortsDone = 3 };
struct Message {
  int rank;
  int kind;
  struct sockaddr_storage addr;
  socklen_t addrLen;
};

/* ---- the rank side ---- */

static int isOwnSocket(unsigned long inode) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  char want[64], link[64], path[300];
  snprintf(want, sizeof(want), "socket:[%lu]", inode);
  int found = 0;
  for (struct dirent* e; !found && (e = readdir(d));) {
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n > 0) {
      link[n] = 0;
      found = strcmp(link, want) == 0;
    }
  }
  closedir(d);
  return found;
}

/* Reports every listening TCP socket of this process to the parent. */
static int reportListeners(int rank, int toParent) {
  const char* tables[2] = {"/proc/self/net/tcp", "/proc/self/net/tcp6"};
  int reported = 0;
  for (int t = 0; t < 2; ++t) {
    FILE* f = fopen(tables[t], "r");
    if (!f) continue;
    char line[512];
    if (!fgets(line, sizeof(line), f)) line[0] = 0; /* header */
    while (fgets(line, sizeof(line), f)) {
      char local[64];
      unsigned port, state;
      unsigned long inode;
      if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*d %*d %lu", local, &port,
                 &state, &inode) != 4 ||
          state != 0x0A || !isOwnSocket(inode))
        continue;
      struct Message m;
      memset(&m, 0, sizeof(m));
      m.rank = rank;
      m.kind = kListening;
      if (t == 0) {
        struct sockaddr_in* a = (struct sockaddr_in*)&m.addr;
        unsigned raw;
        sscanf(local, "%8x", &raw);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = raw; /* printed as the in-memory word */
        a->sin_port = htons((unsigned short)port);
        m.addrLen = sizeof(*a);
      } else {
        struct sockaddr_in6* a = (struct sockaddr_in6*)&m.addr;
        unsigned words[4];
        sscanf(local, "%8x%8x%8x%8x", &words[0], &words[1], &words[2], &words[3]);
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_addr, words, sizeof(words));
        a->sin6_port = htons((unsigned short)port);
        m.addrLen = sizeof(*a);
      }
      if (writeAll(toParent, &m, sizeof(m))) return -1;
      ++reported;
    }
    fclose(f);
  }
  return reported;
}

/* Whether the parent has said the flood is in place (a byte on `fromParent`). */
static int floodSignalled(int fromParent) {
  struct pollfd p = {fromParent, POLLIN, 0};
  char c;
  return poll(&p, 1, 0) > 0 && read(fromParent, &c, 1) == 1;
}

static int rankMain(int rank, const char* commId, int toParent, int fromParent, int idIn,
                    int idOut) {
  ncclUniqueId id;
  if (rank == 0) {
    setenv("NCCL_COMM_ID", commId, 1);
    if (ncclGetUniqueId(&id) != ncclSuccess) return 10;
    unsetenv("NCCL_COMM_ID");
    struct Message m = {.rank = 0, .kind = kRootReady};
    if (writeAll(idOut, &id, sizeof(id)) || writeAll(toParent, &m, sizeof(m))) return 11;
  } else if (readAll(idIn, &id, sizeof(id))) {
    return 12;
  }
  char go;
  if (readAll(fromParent, &go, 1)) return 13; /* the root is flooded */
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, kRanks, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: init with a flooded root failed: %s\n", rank, ncclGetLastError(NULL));
    return 14;
  }
  float* buf = malloc(kCount * sizeof(float));
  if (!buf || allreduceChecked(comm, rank, kRanks, 0, buf, kCount)) return 15;
  if (reportListeners(rank, toParent) < 1) return 16;
  struct Message done = {.rank = rank, .kind = kPortsDone};
  if (writeAll(toParent, &done, sizeof(done))) return 17;

  /* Collectives go on while the stranger floods; both ranks agree (through a max-allreduce)
   * on when each has seen the flood in place, then run kAfterFlood more. */
  int seen = 0, after = 0;
  int flag[1];
  for (int i = 1; after < kAfterFlood; ++i) {
    if (allreduceChecked(comm, rank, kRanks, i, buf, kCount)) return 19;
    seen = seen || floodSignalled(fromParent);
    *flag = seen;
    if (ncclAllReduce(flag, flag, 1, ncclInt, ncclMax, comm, NULL) != ncclSuccess) return 20;
    if (*flag) ++after;
    if (i > 1000000) return 21;
  }

  /* A second communicator while every port is still flooded. */
  ncclUniqueId id2;
  if (rank == 0) {
    if (ncclGetUniqueId(&id2) != ncclSuccess || writeAll(idOut, &id2, sizeof(id2))) return 22;
  } else if (readAll(idIn, &id2, sizeof(id2))) {
    return 23;
  }
  ncclComm_t comm2;
  if (ncclCommInitRank(&comm2, kRanks, id2, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: second init with flooded ports failed: %s\n", rank,
            ncclGetLastError(NULL));
    return 24;
  }
  for (int i = 0; i < kAfterFlood; ++i)
    if (allreduceChecked(comm2, rank, kRanks, i, buf, kCount)) return 25;
  if (ncclCommDestroy(comm2) != ncclSuccess || ncclCommDestroy(comm) != ncclSuccess) return 26;
  free(buf);
  return 0;
}

/* The pipes between the stranger and the rank processes. */
struct RankPipes {
  const char* commId;
  int toParent[2];           /* ranks -> stranger: Messages */
  int idPipe[2];             /* rank 0 -> rank 1: the unique ids */
  int fromParent[kRanks][2]; /* stranger -> rank r: "the flood is in place" */
};

static int rankProcess(int rank, void* arg) {
  const struct RankPipes* p = arg;
  struct rlimit small = {1024, 1024}; /* ranks run with an ordinary limit */
  setrlimit(RLIMIT_NOFILE, &small);
  close(p->toParent[0]);
  close(p->fromParent[rank][1]);
  return rankMain(rank, p->commId, p->toParent[1], p->fromParent[rank][0], p->idPipe[0],
                  p->idPipe[1]);
}

/* ---- the stranger ---- */

/* Opens `count` idle connections to `addr`; returns how many were established, -1 on error. */
static int flood(const struct sockaddr* addr, socklen_t len, int count, int* fds) {
  for (int i = 0; i < count; ++i) {
    fds[i] = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fds[i] < 0) {
      perror("stranger: socket");
      return -1;
    }
    if (connect(fds[i], addr, len) != 0 && errno != EINPROGRESS) {
      close(fds[i]);
      fds[i] = -1;
    }
  }
  /* Wait (bounded) for the handshakes; a full backlog makes the kernel retry the SYN. */
  struct pollfd* p = calloc((size_t)count, sizeof(*p));
  if (!p) return -1;
  int established = 0;
  time_t end = time(NULL) + 15;
  for (int pending = 1; pending && time(NULL) < end;) {
    pending = 0;
    for (int i = 0; i < count; ++i) p[i] = (struct pollfd){fds[i], POLLOUT, 0};
    poll(p, (nfds_t)count, 100);
    established = 0;
    for (int i = 0; i < count; ++i) {
      if (fds[i] < 0) continue;
      int err = 0;
      socklen_t errLen = sizeof(err);
      if (!(p[i].revents & (POLLOUT | POLLERR | POLLHUP))) {
        ++pending;
        continue;
      }
      getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &err, &errLen);
      if (err == 0) ++established;
    }
  }
  free(p);
  return established;
}

static const char* describe(const struct sockaddr_storage* a, char* out, size_t size) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in* s = (const struct sockaddr_in*)a;
    inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
    port = ntohs(s->sin_port);
  } else {
    const struct sockaddr_in6* s = (const struct sockaddr_in6*)a;
    inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
    port = ntohs(s->sin6_port);
  }
  snprintf(out, size, "%s:%u", host, port);
  return out;
}

static int freeLoopbackPort(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof(a)) != 0 ||
      getsockname(fd, (struct sockaddr*)&a, &len) != 0)
    return -1;
  close(fd);
  return ntohs(a.sin_port);
}

int main(int argc, char** argv) {
  const int count = argc > 1 ? atoi(argv[1]) : 1000;
  /* The stranger holds count * (1 + ports) descriptors. */
  struct rlimit lim = {(rlim_t)count * 12 + 256, (rlim_t)count * 12 + 256};
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    struct rlimit cur;
    getrlimit(RLIMIT_NOFILE, &cur);
    lim.rlim_cur = lim.rlim_max = cur.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  int port = freeLoopbackPort();
  if (port < 0) return 1;
  char commId[64];
  snprintf(commId, sizeof(commId), "127.0.0.1:%d", port);

  struct RankPipes rp;
  int *toParent = rp.toParent, *idPipe = rp.idPipe, (*fromParent)[2] = rp.fromParent;
  rp.commId = commId;
  if (pipe(toParent) || pipe(idPipe)) return 1;
  pid_t child[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    if (pipe(fromParent[r])) return 1;
    child[r] = forkRank(rankProcess, r, &rp);
    if (child[r] < 0) return 1;
    close(fromParent[r][0]);
  }
  close(toParent[1]);

  int failed = 0;
  int* fds = malloc(sizeof(int) * (size_t)count * (1 + kMaxPorts * kRanks));
  int used = 0;
  struct Message m;
  if (!fds || readAll(toParent[0], &m, sizeof(m)) || m.kind != kRootReady) {
    fprintf(stderr, "rank 0 did not start its root\n");
    failed = 1;
  }
  if (!failed) {
    struct sockaddr_in root = {.sin_family = AF_INET,
                               .sin_port = htons((unsigned short)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int n = flood((struct sockaddr*)&root, sizeof(root), count, fds);
    printf("root %s: %d of %d idle connections established\n", commId, n, count);
    used = count;
    if (n < count / 2) {
      fprintf(stderr, "the flood did not reach the root\n");
      failed = 1;
    }
    for (int r = 0; r < kRanks; ++r) writeAll(fromParent[r][1], "g", 1);
  }
  struct sockaddr_storage ports[kRanks * kMaxPorts];
  socklen_t portLens[kRanks * kMaxPorts];
  int nports = 0;
  for (int done = 0; !failed && done < kRanks;) {
    if (readAll(toParent[0], &m, sizeof(m))) {
      fprintf(stderr, "a rank died before reporting its ports\n");
      failed = 1;
    } else if (m.kind == kPortsDone) {
      ++done;
    } else if (m.kind == kListening && nports < kRanks * kMaxPorts) {
      ports[nports] = m.addr;
      portLens[nports++] = m.addrLen;
    }
  }
  for (int i = 0; i < nports && !failed; ++i) {
    char text[80];
    int n = flood((struct sockaddr*)&ports[i], portLens[i], count, fds + used);
    used += count;
    printf("rank port %s: %d of %d idle connections established\n",
           describe(&ports[i], text, sizeof(text)), n, count);
    if (n < count / 2) {
      fprintf(stderr, "the flood did not reach %s\n", text);
      failed = 1;
    }
  }
  for (int r = 0; r < kRanks; ++r) writeAll(fromParent[r][1], "f", 1);
  for (int r = 0; r < kRanks; ++r) close(fromParent[r][1]);
  int codes[kRanks];
  waitChildren(child, kRanks, kExitTimeoutMs, codes);
  for (int r = 0; r < kRanks; ++r)
    if (codes[r] != 0) {
      fprintf(stderr, "rank %d ended with %d\n", r, codes[r]);
      failed = 1;
    }
  for (int i = 0; i < used; ++i)
    if (fds[i] >= 0) close(fds[i]);
  free(fds);
  if (failed) return 1;
  printf(
      "%d listening ports of 2 ranks flooded with %d idle connections each (and the root): "
      "init and checked allreduces succeeded\n",
      nports, count);
  return 0;
}
