// libnccl-net-weft.so driven through NCCL's plugin ABI alone (dlopen, ncclNetPlugin_v11), as NCCL
// would: comms in two threads and in two processes, messages of 0 B, 1 B, unaligned and 64 MiB,
// many requests in flight, tags, receives larger than their sends, forged handles, and peers
// that die (test() fails, nothing hangs).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "tests/net_plugin/plugin_driver.h"

using namespace weft::test;

namespace {

struct PluginFixture : ::testing::Test {
  void SetUp() override {
    std::string why;
    net = openWeftPlugin(&ctx, &why);
    ASSERT_NE(net, nullptr) << why;
    dev = socketDevice(net);
    ASSERT_GE(dev, 0);
  }
  // A send comm and a recv comm to ourselves, connect and accept in two threads.
  void pair(void** sendComm, void** recvComm) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listenComm = nullptr;
    ASSERT_EQ(net->listen(ctx, dev, handle, &listenComm), kNcclNetSuccess);
    bool connected = false;
    std::thread t([&] { connected = connectComm(net, ctx, dev, handle, sendComm); });
    EXPECT_TRUE(acceptComm(net, listenComm, recvComm));
    t.join();
    EXPECT_TRUE(connected);
    EXPECT_EQ(net->closeListen(listenComm), kNcclNetSuccess);
  }
  void* isend(void* comm, void* data, size_t size, int tag) {
    void* req = nullptr;
    EXPECT_TRUE(pollUntil([&] {
      if (net->isend(comm, data, size, tag, nullptr, nullptr, &req) != kNcclNetSuccess) return -1;
      return req ? 1 : 0;
    }));
    return req;
  }
  void* irecv(void* comm, void* data, size_t size, int tag) {
    void* req = nullptr;
    EXPECT_TRUE(pollUntil([&] {
      if (net->irecv(comm, 1, &data, &size, &tag, nullptr, nullptr, &req) != kNcclNetSuccess)
        return -1;
      return req ? 1 : 0;
    }));
    return req;
  }
  const ncclNet_v11_t* net = nullptr;
  void* ctx = nullptr;
  int dev = 0;
};

std::vector<char> pattern(size_t n, unsigned seed) {
  std::vector<char> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : v) c = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
  return v;
}

TEST_F(PluginFixture, ExportsBothVersions) {
  void* lib = dlopen(weftPluginPath(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr);
  auto* v10 = static_cast<const ncclNet_v10_t*>(dlsym(lib, "ncclNetPlugin_v10"));
  ASSERT_NE(v10, nullptr);
  EXPECT_STREQ(v10->name, "Weft");
  EXPECT_STREQ(net->name, "Weft");
  EXPECT_EQ(v10->init(nullptr, nullptr), kNcclNetSuccess);
  ncclNetProperties_v11_t props{};
  ASSERT_EQ(net->getProperties(dev, &props), kNcclNetSuccess);
  EXPECT_STREQ(props.name, "weft-socket");
  EXPECT_EQ(props.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(props.maxRecvs, 1);
  EXPECT_EQ(props.maxMultiRequestSize, 1);
  EXPECT_NE(net->getProperties(dev + 1, &props), kNcclNetSuccess);
  void* mh = nullptr;
  char buf[8];
  void *s, *r;
  pair(&s, &r);
  EXPECT_EQ(net->regMr(s, buf, sizeof(buf), NCCL_PTR_HOST, &mh), kNcclNetSuccess);
  EXPECT_EQ(net->deregMr(s, mh), kNcclNetSuccess);
  EXPECT_NE(net->regMr(s, buf, sizeof(buf), NCCL_PTR_CUDA, &mh), kNcclNetSuccess);
  net->closeSend(s);
  net->closeRecv(r);
}

TEST_F(PluginFixture, SizesZeroOneUnalignedAndLarge) {
  void *s, *r;
  pair(&s, &r);
  for (size_t size :
       {size_t(0), size_t(1), size_t(7), size_t(4099), size_t(262145), size_t(64) << 20}) {
    // Both buffers start 3 bytes past an aligned address.
    std::vector<char> src = pattern(size + 3, static_cast<unsigned>(size));
    std::vector<char> dst(size + 3, 0);
    void* rq = irecv(r, dst.data() + 3, size, 9);
    void* sq = isend(s, src.data() + 3, size, 9);
    int got = -1;
    ASSERT_EQ(waitRequests(net, sq, rq, &got), kNcclNetSuccess) << size;
    EXPECT_EQ(got, static_cast<int>(size));
    EXPECT_EQ(std::memcmp(src.data() + 3, dst.data() + 3, size), 0) << size;
  }
  net->closeSend(s);
  net->closeRecv(r);
}

TEST_F(PluginFixture, ManyOutstandingInOrder) {
  void *s, *r;
  pair(&s, &r);
  constexpr int kCount = NCCL_NET_MAX_REQUESTS;
  std::vector<std::vector<char>> src(kCount), dst(kCount);
  std::vector<void*> sq(kCount), rq(kCount);
  for (int i = 0; i < kCount; ++i) {
    src[i] = pattern(1000 * i + i % 3, i);
    dst[i].assign(src[i].size() + 64, 0);
    rq[i] = irecv(r, dst[i].data(), dst[i].size(), i);
  }
  for (int i = 0; i < kCount; ++i) sq[i] = isend(s, src[i].data(), src[i].size(), i);
  // Every request slot is in use: one more is refused (a null request), not an error.
  void* extra = nullptr;
  char byte = 0;
  EXPECT_EQ(net->isend(s, &byte, 1, 0, nullptr, nullptr, &extra), kNcclNetSuccess);
  EXPECT_EQ(extra, nullptr);
  // Tested newest first, sends and receives by turns (a plugin moves data only as it is called,
  // as NCCL's proxy calls it): each completes once, with its own size and data.
  std::vector<int> got(kCount, -1);
  std::vector<bool> sent(kCount, false), received(kCount, false);
  ASSERT_TRUE(pollUntil([&] {
    bool all = true;
    for (int i = kCount - 1; i >= 0; --i) {
      int done = 0;
      if (!received[i]) {
        if (net->test(rq[i], &done, &got[i]) != kNcclNetSuccess) return -1;
        received[i] = done != 0;
      }
      if (!sent[i]) {
        if (net->test(sq[i], &done, nullptr) != kNcclNetSuccess) return -1;
        sent[i] = done != 0;
      }
      all = all && sent[i] && received[i];
    }
    return all ? 1 : 0;
  }));
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(got[i], static_cast<int>(src[i].size())) << i;
    EXPECT_EQ(std::memcmp(src[i].data(), dst[i].data(), src[i].size()), 0) << i;
  }
  net->closeSend(s);
  net->closeRecv(r);
}

TEST_F(PluginFixture, ReceiveLargerThanSendReportsTheSize) {
  void *s, *r;
  pair(&s, &r);
  std::vector<char> src = pattern(1000, 1), dst(1 << 20, 0);
  void* rq = irecv(r, dst.data(), dst.size(), 3);
  void* sq = isend(s, src.data(), src.size(), 3);
  int got = -1;
  ASSERT_EQ(waitRequest(net, rq, &got), kNcclNetSuccess);
  EXPECT_EQ(got, 1000);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), 1000), 0);
  EXPECT_EQ(dst[1000], 0);
  EXPECT_EQ(waitRequest(net, sq), kNcclNetSuccess);
  net->closeSend(s);
  net->closeRecv(r);
}

// Tags: a send matches the receive of its tag; one that does not match, or that is larger than
// its receive, fails the receive (and nothing is written past the buffer).
TEST_F(PluginFixture, TagMismatchAndOversizeFail) {
  for (bool oversize : {false, true}) {
    void *s, *r;
    pair(&s, &r);
    std::vector<char> src = pattern(5000, 2), dst(8192, 0x55);
    void* rq = irecv(r, dst.data(), oversize ? 4096 : 8192, 7);
    void* sq = isend(s, src.data(), src.size(), oversize ? 7 : 8);
    EXPECT_NE(waitRequest(net, rq), kNcclNetSuccess) << (oversize ? "oversize" : "tag");
    for (size_t i = 4096; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0x55) << i;
    (void)sq;
    net->closeSend(s);
    net->closeRecv(r);
  }
}

// Handles come from the peer: forged ones are refused, never dereferenced.
TEST_F(PluginFixture, ForgedHandlesAreRefused) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(ctx, dev, handle, &listenComm), kNcclNetSuccess);
  for (int field : {0, 4, 6, 8, 12}) {  // magic, kind, sockets, address length, address family
    char forged[NCCL_NET_HANDLE_MAXSIZE];
    std::memcpy(forged, handle, sizeof(forged));
    forged[field] ^= 0x7f;
    void* sendComm = nullptr;
    EXPECT_NE(net->connect(ctx, dev, forged, &sendComm, nullptr), kNcclNetSuccess) << field;
    EXPECT_EQ(sendComm, nullptr);
  }
  net->closeListen(listenComm);
}

// Two processes: the handle crosses a pipe, data crosses both ways.
TEST_F(PluginFixture, TwoProcesses) {
  int toChild[2], toParent[2];
  ASSERT_EQ(pipe(toChild), 0);
  ASSERT_EQ(pipe(toParent), 0);
  const size_t size = (8 << 20) + 5;
  pid_t pid = fork();
  if (pid == 0) {
    void* cctx = nullptr;
    std::string why;
    const ncclNet_v11_t* cnet = openWeftPlugin(&cctx, &why);
    if (!cnet) _exit(10);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listenComm = nullptr;
    if (cnet->listen(cctx, socketDevice(cnet), handle, &listenComm) != kNcclNetSuccess) _exit(11);
    if (write(toParent[1], handle, sizeof(handle)) != sizeof(handle)) _exit(12);
    void* recvComm = nullptr;
    if (!acceptComm(cnet, listenComm, &recvComm)) _exit(13);
    std::vector<char> dst(size);
    void* data = dst.data();
    size_t sz = size;
    int tag = 1;
    void* req = nullptr;
    if (!pollUntil([&] {
          if (cnet->irecv(recvComm, 1, &data, &sz, &tag, nullptr, nullptr, &req) != 0) return -1;
          return req ? 1 : 0;
        }))
      _exit(14);
    int got = -1;
    if (waitRequest(cnet, req, &got) != kNcclNetSuccess || got != static_cast<int>(size)) _exit(15);
    if (dst != pattern(size, 77)) _exit(16);
    // Back the other way, over a comm the child connects.
    char back[NCCL_NET_HANDLE_MAXSIZE];
    if (read(toChild[0], back, sizeof(back)) != sizeof(back)) _exit(17);
    void* sendComm = nullptr;
    if (!connectComm(cnet, cctx, socketDevice(cnet), back, &sendComm)) _exit(18);
    req = nullptr;
    if (!pollUntil([&] {
          if (cnet->isend(sendComm, dst.data(), 12345, 2, nullptr, nullptr, &req) != 0) return -1;
          return req ? 1 : 0;
        }))
      _exit(19);
    if (waitRequest(cnet, req) != kNcclNetSuccess) _exit(20);
    cnet->closeSend(sendComm);
    cnet->closeRecv(recvComm);
    _exit(0);
  }
  close(toParent[1]);  // a child that fails early ends the read below
  close(toChild[0]);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  ASSERT_EQ(read(toParent[0], handle, sizeof(handle)), ssize_t(sizeof(handle)));
  void* sendComm = nullptr;
  ASSERT_TRUE(connectComm(net, ctx, dev, handle, &sendComm));
  std::vector<char> src = pattern(size, 77);
  void* sq = isend(sendComm, src.data(), size, 1);
  EXPECT_EQ(waitRequest(net, sq), kNcclNetSuccess);
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(ctx, dev, handle, &listenComm), kNcclNetSuccess);
  ASSERT_EQ(write(toChild[1], handle, sizeof(handle)), ssize_t(sizeof(handle)));
  void* recvComm = nullptr;
  ASSERT_TRUE(acceptComm(net, listenComm, &recvComm));
  std::vector<char> back(20000);
  void* rq = irecv(recvComm, back.data(), back.size(), 2);
  int got = -1;
  EXPECT_EQ(waitRequest(net, rq, &got), kNcclNetSuccess);
  EXPECT_EQ(got, 12345);
  EXPECT_EQ(std::memcmp(back.data(), src.data(), 12345), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
  for (int fd : {toChild[1], toParent[0]}) close(fd);
}

// A peer killed mid-transfer: the survivor's receive and send fail within the wait, no hang.
TEST_F(PluginFixture, PeerThatDiesFailsTheRequests) {
  int toParent[2];
  ASSERT_EQ(pipe(toParent), 0);
  char handles[2][NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(ctx, dev, handles[0], &listenComm), kNcclNetSuccess);
  pid_t pid = fork();
  if (pid == 0) {
    void* cctx = nullptr;
    std::string why;
    const ncclNet_v11_t* cnet = openWeftPlugin(&cctx, &why);
    if (!cnet) _exit(10);
    void* sendComm = nullptr;
    if (!connectComm(cnet, cctx, socketDevice(cnet), handles[0], &sendComm)) _exit(11);
    // A receiver for the parent's sends, never drained.
    void* lc = nullptr;
    if (cnet->listen(cctx, socketDevice(cnet), handles[1], &lc) != kNcclNetSuccess) _exit(12);
    if (write(toParent[1], handles[1], sizeof(handles[1])) != sizeof(handles[1])) _exit(13);
    void* recvComm = nullptr;
    if (!acceptComm(cnet, lc, &recvComm)) _exit(14);
    // Part of a message: isend() posts the header and the pieces that fit the connection's
    // slots, and nothing more moves without test(); then the process dies.
    std::vector<char> big(64 << 20, 1);
    void* req = nullptr;
    cnet->isend(sendComm, big.data(), big.size(), 0, nullptr, nullptr, &req);
    usleep(20000);
    kill(getpid(), SIGKILL);
  }
  close(toParent[1]);  // a child that fails early ends the read below
  void* recvComm = nullptr;
  ASSERT_TRUE(acceptComm(net, listenComm, &recvComm));
  int status = 0;
  ASSERT_EQ(read(toParent[0], handles[1], sizeof(handles[1])), ssize_t(sizeof(handles[1])))
      << (waitpid(pid, &status, 0), status);
  void* sendComm = nullptr;
  ASSERT_TRUE(connectComm(net, ctx, dev, handles[1], &sendComm));
  std::vector<char> dst(64 << 20), src(64 << 20, 2);
  void* rq = irecv(recvComm, dst.data(), dst.size(), 0);
  void* sq = isend(sendComm, src.data(), src.size(), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(waitRequest(net, rq), kNcclNetRemoteError);
  EXPECT_EQ(waitRequest(net, sq), kNcclNetRemoteError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  waitpid(pid, nullptr, 0);
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
  close(toParent[0]);
}

}  // namespace
