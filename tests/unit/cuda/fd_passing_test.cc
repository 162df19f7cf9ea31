// Moving an fd from its owner process to a peer (transports/cuda/fd_passing.h), with a memfd
// standing in for a cuMem allocation's fd: a forked owner shares it, the parent fetches it by
// pidfd_getfd or by the owner's socket, and both sides check the other's writes through it.
#include "transports/cuda/fd_passing.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace weft::transport::cuda {
namespace {

constexpr size_t kBytes = 1 << 16;
constexpr int kChildWaitMs = 20000;

struct Offer {
  int pid;
  int fd;
  uint64_t nonce;
  uint64_t secret;
};

bool readFully(int fd, void* out, size_t n, int timeoutMs) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeoutMs) <= 0) return false;
    const ssize_t got = read(fd, p, n);
    if (got <= 0) return false;
    p += got, n -= static_cast<size_t>(got);
  }
  return true;
}

// The owner: a memfd filled with 0xA5, shared with `secret`, offered through `toParent`; once
// the parent says it is done, checks that the parent wrote 0x5A everywhere. Exit 0 on success.
[[noreturn]] void runOwner(int toParent, int fromParent, uint64_t secret) {
  const int mem = memfd_create("fd-passing-test", MFD_CLOEXEC);
  if (mem < 0 || ftruncate(mem, kBytes) != 0) _exit(10);
  auto* p = static_cast<unsigned char*>(
      mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0));
  if (p == MAP_FAILED) _exit(11);
  std::memset(p, 0xA5, kBytes);
  std::string why;
  std::unique_ptr<FdServer> server = FdServer::start(&why);
  if (!server) _exit(12);
  server->share(mem, secret);
  const Offer offer{getpid(), mem, server->nonce(), secret};
  if (write(toParent, &offer, sizeof offer) != static_cast<ssize_t>(sizeof offer)) _exit(13);
  char done = 0;
  if (!readFully(fromParent, &done, 1, kChildWaitMs)) _exit(14);
  for (size_t i = 0; i < kBytes; ++i)
    if (p[i] != 0x5A) _exit(15);
  server->withdraw(mem);
  _exit(done == 'y' ? 0 : 16);
}

class FdPassing : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, pipe2(toParent_, O_CLOEXEC));
    ASSERT_EQ(0, pipe2(fromParent_, O_CLOEXEC));
    child_ = fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) runOwner(toParent_[1], fromParent_[0], kSecret);
    ASSERT_TRUE(readFully(toParent_[0], &offer_, sizeof offer_, kChildWaitMs));
  }
  void TearDown() override {
    if (child_ > 0) {
      if (!released_) release('n');
      int status = 0;
      waitpid(child_, &status, 0);
    }
    for (int fd : {toParent_[0], toParent_[1], fromParent_[0], fromParent_[1]}) close(fd);
  }
  void release(char verdict) {
    released_ = true;
    ASSERT_EQ(1, write(fromParent_[1], &verdict, 1));
  }
  // Checks the owner's bytes through `fd`, writes the parent's, and has the owner check them.
  void exchangeThrough(int fd) {
    auto* p = static_cast<unsigned char*>(
        mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ASSERT_NE(p, MAP_FAILED);
    for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(p[i], 0xA5) << "byte " << i;
    std::memset(p, 0x5A, kBytes);
    munmap(p, kBytes);
    release('y');
    int status = 0;
    ASSERT_EQ(child_, waitpid(child_, &status, 0));
    child_ = -1;
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status)) << "the owner did not see the parent's writes";
  }

  static constexpr uint64_t kSecret = 0x0123456789abcdefull;
  int toParent_[2] = {-1, -1}, fromParent_[2] = {-1, -1};
  pid_t child_ = -1;
  bool released_ = false;
  Offer offer_{};
};

TEST_F(FdPassing, SocketRouteMovesTheFdAndDataFlowsBothWays) {
  std::string why;
  bool viaSocket = false;
  const int fd = fetchPeerFd(offer_.pid, offer_.fd, offer_.nonce, offer_.secret,
                             std::chrono::seconds(10), FdRoute::kSocketOnly, &why, &viaSocket);
  ASSERT_GE(fd, 0) << why;
  EXPECT_TRUE(viaSocket);
  exchangeThrough(fd);
  close(fd);
}

TEST_F(FdPassing, AnyRouteMovesTheFd) {
  std::string why;
  bool viaSocket = false;
  const int fd = fetchPeerFd(offer_.pid, offer_.fd, offer_.nonce, offer_.secret,
                             std::chrono::seconds(10), FdRoute::kAny, &why, &viaSocket);
  ASSERT_GE(fd, 0) << why;
  // Which route served depends on this machine's ptrace policy; both must deliver the memory.
  std::printf("fd came by %s\n", viaSocket ? "the owner's socket" : "pidfd_getfd");
  exchangeThrough(fd);
  close(fd);
}

TEST_F(FdPassing, WrongSecretIsRefused) {
  std::string why;
  EXPECT_LT(fetchPeerFd(offer_.pid, offer_.fd, offer_.nonce, offer_.secret + 1,
                        std::chrono::seconds(10), FdRoute::kSocketOnly, &why),
            0);
  EXPECT_NE(why.find("wrong secret"), std::string::npos) << why;
}

TEST_F(FdPassing, FdThatWasNotSharedIsRefused) {
  std::string why;
  EXPECT_LT(fetchPeerFd(offer_.pid, offer_.fd + 100, offer_.nonce, offer_.secret,
                        std::chrono::seconds(10), FdRoute::kSocketOnly, &why),
            0);
  EXPECT_NE(why.find("not shared"), std::string::npos) << why;
}

TEST_F(FdPassing, WrongNonceFindsNoSocket) {
  std::string why;
  EXPECT_LT(fetchPeerFd(offer_.pid, offer_.fd, offer_.nonce ^ 1, offer_.secret,
                        std::chrono::seconds(1), FdRoute::kSocketOnly, &why),
            0);
  EXPECT_NE(why.find("connecting to the fd socket"), std::string::npos) << why;
}

TEST(FdPassingNoOwner, NoSocketOfferedSaysSo) {
  std::string why;
  EXPECT_LT(fetchPeerFd(getpid(), 12345, 0, 1, std::chrono::seconds(1), FdRoute::kSocketOnly, &why),
            0);
  EXPECT_NE(why.find("offers no fd socket"), std::string::npos) << why;
}

TEST(FdPassingNoOwner, ServerStopsPromptly) {
  std::string why;
  auto server = FdServer::start(&why);
  ASSERT_TRUE(server) << why;
  EXPECT_NE(server->nonce(), 0u);
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST(FdPassingNoOwner, RandomNonzero) {
  EXPECT_NE(randomNonzero64(), 0u);
  EXPECT_NE(randomNonzero64(), randomNonzero64());
}

}  // namespace
}  // namespace weft::transport::cuda
