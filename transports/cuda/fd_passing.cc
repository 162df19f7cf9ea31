#include "transports/cuda/fd_passing.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "src/common/error.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every Linux architecture
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace weft::transport::cuda {
namespace {

// How long the server's thread waits in one poll before it looks at its stop event again, and
// how long it gives one asker to send its request.
constexpr int kServerPollMs = 1000;
constexpr timeval kServerRequestTimeout{1, 0};

struct FdRequest {
  uint64_t secret;
  int32_t fd;
  uint32_t zero;
};

struct FdReply {
  int32_t status;  // 0: the fd follows as SCM_RIGHTS; else an errno value
  uint32_t zero;
};

sockaddr_un socketAddress(int pid, uint64_t nonce, socklen_t* length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): nothing in the file system to clean up after a crash.
  char name[64];
  const int n = std::snprintf(name, sizeof name, "weft-cudafd-%d-%016llx", pid,
                              static_cast<unsigned long long>(nonce));
  std::memcpy(addr.sun_path + 1, name, static_cast<size_t>(n));
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return addr;
}

void setTimeouts(int fd, timeval t) {
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
}

timeval toTimeval(std::chrono::milliseconds ms) {
  const long long v = std::max<long long>(ms.count(), 1);
  return timeval{static_cast<time_t>(v / 1000), static_cast<suseconds_t>((v % 1000) * 1000)};
}

}  // namespace

struct FdServer::State {
  int listenFd = -1;
  int stopFd = -1;
  uint64_t nonce = 0;
  std::mutex mu;
  std::map<int, uint64_t> shared;  // fd -> secret
  std::atomic<uint64_t> served{0};
  std::atomic<bool> stopping{false};
  std::thread thread;

  void answer(int client) {
    setTimeouts(client, kServerRequestTimeout);
    FdRequest req{};
    if (recv(client, &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) return;
    int fd = -1;
    FdReply reply{EPERM, 0};
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = shared.find(req.fd);
      if (it == shared.end())
        reply.status = EBADF;
      else if (it->second == req.secret && req.secret != 0)
        reply.status = 0, fd = req.fd;
      // The fd is sent under the lock: withdraw() (then close) cannot run in between.
      iovec iov{&reply, sizeof reply};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      if (fd >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
      }
      if (sendmsg(client, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof reply) && fd >= 0)
        served.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void run() {
    while (!stopping.load(std::memory_order_acquire)) {
      pollfd fds[2] = {{listenFd, POLLIN, 0}, {stopFd, POLLIN, 0}};
      const int n = poll(fds, 2, kServerPollMs);
      if (n < 0 && errno != EINTR) return;
      if (fds[1].revents) return;
      if (n <= 0 || !(fds[0].revents & POLLIN)) continue;
      const int client = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      answer(client);
      close(client);
    }
  }
};

FdServer::FdServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

std::unique_ptr<FdServer> FdServer::start(std::string* why) {
  auto s = std::make_unique<State>();
  s->nonce = randomNonzero64();
  s->listenFd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s->listenFd < 0) {
    *why = sysError("CUDA fd server: socket", errno);
    return nullptr;
  }
  socklen_t length = 0;
  const sockaddr_un addr = socketAddress(getpid(), s->nonce, &length);
  if (bind(s->listenFd, reinterpret_cast<const sockaddr*>(&addr), length) != 0 ||
      listen(s->listenFd, 64) != 0) {
    *why = sysError("CUDA fd server: bind/listen", errno);
    close(s->listenFd);
    return nullptr;
  }
  s->stopFd = eventfd(0, EFD_CLOEXEC);
  if (s->stopFd < 0) {
    *why = sysError("CUDA fd server: eventfd", errno);
    close(s->listenFd);
    return nullptr;
  }
  State* raw = s.get();
  s->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<FdServer>(new FdServer(std::move(s)));
}

FdServer::~FdServer() {
  // The event wakes the thread at once; the flag ends it at its next poll timeout regardless.
  state_->stopping.store(true, std::memory_order_release);
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = write(state_->stopFd, &one, sizeof one);
  if (state_->thread.joinable()) state_->thread.join();
  close(state_->listenFd);
  close(state_->stopFd);
}

uint64_t FdServer::nonce() const { return state_->nonce; }

void FdServer::share(int fd, uint64_t secret) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->shared[fd] = secret;
}

void FdServer::withdraw(int fd) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->shared.erase(fd);
}

uint64_t FdServer::served() const { return state_->served.load(std::memory_order_relaxed); }

namespace {

// -1 and errno set when pidfd_getfd is unavailable or refused.
int fetchWithPidfd(int ownerPid, int ownerFd) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, ownerPid, 0));
  if (pidfd < 0) return -1;
  const int fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, ownerFd, 0));
  const int e = errno;
  close(pidfd);
  errno = e;
  return fd;
}

int fetchFromSocket(int ownerPid, int ownerFd, uint64_t nonce, uint64_t secret,
                    std::chrono::milliseconds timeout, std::string* why) {
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) {
    *why = sysError("socket", errno);
    return -1;
  }
  setTimeouts(s, toTimeval(timeout));
  socklen_t length = 0;
  const sockaddr_un addr = socketAddress(ownerPid, nonce, &length);
  if (connect(s, reinterpret_cast<const sockaddr*>(&addr), length) != 0) {
    *why = sysError("connecting to the fd socket of process " + std::to_string(ownerPid), errno);
    close(s);
    return -1;
  }
  const FdRequest req{secret, ownerFd, 0};
  if (send(s, &req, sizeof req, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof req)) {
    *why = sysError("sending the fd request", errno);
    close(s);
    return -1;
  }
  FdReply reply{};
  iovec iov{&reply, sizeof reply};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t got = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
  const int e = errno;
  close(s);
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); got > 0 && c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int)))
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  if (got != static_cast<ssize_t>(sizeof reply)) {
    if (fd >= 0) close(fd);
    *why = got < 0 ? sysError("waiting for the fd reply", e) : "short fd reply";
    return -1;
  }
  if (reply.status != 0 || fd < 0) {
    if (fd >= 0) close(fd);
    *why = "process " + std::to_string(ownerPid) + " refused fd " + std::to_string(ownerFd) + ": " +
           (reply.status == EBADF   ? std::string("not shared")
            : reply.status == EPERM ? std::string("wrong secret")
                                    : sysError("", reply.status));
    return -1;
  }
  return fd;
}

}  // namespace

int fetchPeerFd(int ownerPid, int ownerFd, uint64_t socketNonce, uint64_t secret,
                std::chrono::milliseconds timeout, FdRoute route, std::string* why,
                bool* usedSocket) {
  if (usedSocket) *usedSocket = false;
  std::string pidfdWhy;
  if (route == FdRoute::kAny) {
    const int fd = fetchWithPidfd(ownerPid, ownerFd);
    if (fd >= 0) return fd;
    if (errno == ESRCH) {
      *why = "process " + std::to_string(ownerPid) + " is gone";
      return -1;
    }
    pidfdWhy = sysError("pidfd_getfd", errno);
  }
  if (socketNonce == 0) {
    *why = pidfdWhy + (pidfdWhy.empty() ? "" : ", and ") + "the owner offers no fd socket";
    return -1;
  }
  std::string socketWhy;
  const int fd = fetchFromSocket(ownerPid, ownerFd, socketNonce, secret, timeout, &socketWhy);
  if (fd < 0) {
    *why = pidfdWhy + (pidfdWhy.empty() ? "" : "; then ") + socketWhy;
    return -1;
  }
  if (usedSocket) *usedSocket = true;
  return fd;
}

uint64_t randomNonzero64() {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v))
      fail(Status::kSystemError, sysError("getrandom", errno));
  }
  return v;
}

}  // namespace weft::transport::cuda
