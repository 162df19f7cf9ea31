// Moving a file descriptor (a cuMem allocation exported as a POSIX fd) from its owner process to
// a peer on the same host. The peer first asks the kernel for a copy of the owner's fd
// (pidfd_open + pidfd_getfd, which needs ptrace rights over the owner: Yama or a seccomp policy
// often refuses it); where that is refused it asks the owner's FdServer over an abstract unix
// socket, which answers with the fd as SCM_RIGHTS once the asker shows the descriptor's secret.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace weft::transport::cuda {

// The owner's side: one per process that exports cuMem memory. A thread serves requests; it
// waits on the socket and a stop event in bounded polls, so it idles without spinning and ends
// within one poll period of the destructor.
class FdServer {
 public:
  // Listens on "@weft-cudafd-<pid>-<nonce>"; null (and why) where the socket cannot be made.
  static std::unique_ptr<FdServer> start(std::string* why);
  ~FdServer();
  FdServer(const FdServer&) = delete;
  FdServer& operator=(const FdServer&) = delete;

  uint64_t nonce() const;
  // Hands `fd` to askers that present `secret` (nonzero). The caller keeps owning the fd and
  // withdraws it before closing it.
  void share(int fd, uint64_t secret);
  void withdraw(int fd);
  uint64_t served() const;  // fds sent so far

  struct State;

 private:
  explicit FdServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

enum class FdRoute {
  kAny,         // pidfd_getfd, then the owner's socket where that is refused
  kSocketOnly,  // the owner's socket alone (tests; a kernel without pidfd_getfd)
};

// A new fd (the caller closes it) for fd `ownerFd` of process `ownerPid`, or -1 and why. Waits
// at most `timeout` for the owner's socket. `usedSocket`, if given, says which route served.
int fetchPeerFd(int ownerPid, int ownerFd, uint64_t socketNonce, uint64_t secret,
                std::chrono::milliseconds timeout, FdRoute route, std::string* why,
                bool* usedSocket = nullptr);

// 64 random bits from the kernel (getrandom), never 0: socket nonces and secrets.
uint64_t randomNonzero64();

}  // namespace weft::transport::cuda
