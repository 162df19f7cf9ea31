// The tcp transport's wire format and its behaviour towards hostile or broken peers: frames are
// checked before any payload is read; a truncated, oversized or garbage frame fails only the
// connection it arrived on; strangers on the listening port are dropped.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "tests/conformance/pair_harness.h"
#include "transports/tcp/published.h"
#include "transports/tcp/wire.h"

namespace weft::test {
namespace {

using tcp::FrameHeader;
using tcp::Hello;

TEST(TcpWire, HelloRoundTrip) {
  Hello h;
  h.commHash = 0x1122334455667788ull;
  h.srcRank = 3;
  h.dstRank = 9;
  h.channel = 5;
  h.socketIndex = 1;
  h.sockets = 4;
  h.slots = 8;
  h.slotBytes = 131072;
  for (int i = 0; i < 16; ++i) h.token[i] = static_cast<uint8_t>(i * 17);
  uint8_t buf[tcp::kHelloBytes];
  tcp::encodeHello(h, buf);
  Hello d;
  std::string why;
  ASSERT_TRUE(tcp::decodeHello(buf, &d, &why)) << why;
  EXPECT_EQ(d.commHash, h.commHash);
  EXPECT_EQ(d.srcRank, 3);
  EXPECT_EQ(d.dstRank, 9);
  EXPECT_EQ(d.channel, 5u);
  EXPECT_EQ(d.socketIndex, 1u);
  EXPECT_EQ(d.sockets, 4u);
  EXPECT_EQ(d.slotBytes, 131072u);
  EXPECT_EQ(std::memcmp(d.token, h.token, 16), 0);
  // Byte order is fixed: the magic reads "WTH1".
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 4), "WTH1");
}

TEST(TcpWire, HelloRejectsNonsense) {
  Hello h;
  h.srcRank = 0;
  h.dstRank = 1;
  h.sockets = 2;
  uint8_t buf[tcp::kHelloBytes];
  std::string why;
  Hello d;
  tcp::encodeHello(h, buf);
  buf[0] ^= 1;
  EXPECT_FALSE(tcp::decodeHello(buf, &d, &why));
  h.socketIndex = 2;  // of 2
  tcp::encodeHello(h, buf);
  EXPECT_FALSE(tcp::decodeHello(buf, &d, &why));
  h.socketIndex = 0;
  h.sockets = 1000;
  tcp::encodeHello(h, buf);
  EXPECT_FALSE(tcp::decodeHello(buf, &d, &why));
  h.sockets = 1;
  h.dstRank = 0;  // talking to itself
  tcp::encodeHello(h, buf);
  EXPECT_FALSE(tcp::decodeHello(buf, &d, &why));
}

TEST(TcpWire, FrameBoundsAreChecked) {
  FrameHeader f;
  f.part = 1;
  f.parts = 2;
  f.tag = 77;
  f.total = 1000;
  f.offset = 500;
  f.length = 500;
  f.seq = 12345678901ull;
  uint8_t buf[tcp::kFrameHeaderBytes];
  tcp::encodeFrame(f, buf);
  FrameHeader d;
  std::string why;
  ASSERT_TRUE(tcp::decodeFrame(buf, 1000, &d, &why)) << why;
  EXPECT_EQ(d.seq, f.seq);
  EXPECT_EQ(d.tag, 77u);
  EXPECT_FALSE(tcp::decodeFrame(buf, 999, &d, &why));  // slot smaller than the message
  EXPECT_NE(why.find("oversized"), std::string::npos);
  f.length = 501;  // one byte past the slot
  tcp::encodeFrame(f, buf);
  EXPECT_FALSE(tcp::decodeFrame(buf, 1 << 20, &d, &why));
  f.offset = 0xffffffffu;  // offset + length overflows 32 bits
  f.length = 2;
  tcp::encodeFrame(f, buf);
  EXPECT_FALSE(tcp::decodeFrame(buf, 1 << 20, &d, &why));
  f.offset = 0;
  f.part = 2;  // of 2
  tcp::encodeFrame(f, buf);
  EXPECT_FALSE(tcp::decodeFrame(buf, 1 << 20, &d, &why));
  f.part = 0;
  f.parts = 0;
  tcp::encodeFrame(f, buf);
  EXPECT_FALSE(tcp::decodeFrame(buf, 1 << 20, &d, &why));
}

TEST(TcpWire, RandomHeadersNeverPassUnchecked) {
  std::mt19937_64 rng(1);
  uint8_t buf[tcp::kFrameHeaderBytes];
  for (int i = 0; i < 200000; ++i) {
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    if (i & 1) std::memcpy(buf, "WTF1", 4);  // half of them with a valid magic
    if (i & 2) buf[4] = 1, buf[7] = 0;
    FrameHeader d;
    std::string why;
    if (tcp::decodeFrame(buf, 131072, &d, &why)) {
      ASSERT_LE(d.total, 131072u);
      ASSERT_LE(uint64_t(d.offset) + d.length, d.total);
      ASSERT_LT(d.part, d.parts);
    }
  }
}

TEST(TcpWire, StripesCoverTheSlot) {
  for (uint64_t bytes : {0ull, 1ull, 63ull, 64ull, 65536ull, 65537ull, 131072ull, 1000003ull})
    for (uint32_t socks : {1u, 2u, 3u, 8u, 64u}) {
      uint32_t parts = tcp::partCount(bytes, socks, 4096);
      ASSERT_GE(parts, 1u);
      ASSERT_LE(parts, socks);
      EXPECT_EQ(tcp::partOffset(bytes, parts, 0), 0u);
      EXPECT_EQ(tcp::partOffset(bytes, parts, parts), bytes);
      for (uint32_t i = 0; i < parts; ++i)
        EXPECT_LE(tcp::partOffset(bytes, parts, i), tcp::partOffset(bytes, parts, i + 1));
    }
}

// ---- a hand-made peer on a real socket ----

int dial(const transport::PeerInfo& target) {
  const tcp::Published at = tcp::publishedBy(target);
  int fd = ::socket(reinterpret_cast<const sockaddr*>(at.addr)->sa_family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(at.addr), at.addrLen) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends everything, as a hand-made peer. A link that rejected what came first resets its socket,
// so the rest of a bad frame may meet ECONNRESET: the test then checks the link's error.
void sendAll(int fd, const void* data, size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == ECONNRESET || errno == EPIPE)) return;
    ASSERT_GT(w, 0) << std::strerror(errno);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// True when the other end closed `fd` within `ms`.
bool closedByPeer(int fd, int ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      char buf[4096];
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
  }
  return false;
}

class HostilePeer : public ::testing::Test {
 protected:
  // One socket per connection, so the hand-made peer below is the whole connection.
  void SetUp() override {
    setenv("NCCL_NSOCKS_PERTHREAD", "1", 1);
    pair_ = std::make_unique<TransportPair>("tcp");
  }
  void TearDown() override {
    pair_.reset();
    unsetenv("NCCL_NSOCKS_PERTHREAD");
  }

  // Rank 1 accepts a connection on `channel` from what claims to be rank 0.
  int impersonate(int channel, const uint8_t* token = nullptr) {
    Hello h;
    h.commHash = pair_->ctx(0).commHash;
    h.srcRank = 0;
    h.dstRank = 1;
    h.channel = static_cast<uint32_t>(channel);
    h.socketIndex = 0;
    h.sockets = tcp::publishedBy(pair_->peer(0)).sockets;
    h.slots = pair_->ctx(0).slots;
    h.slotBytes = pair_->ctx(0).slotBytes;
    const tcp::Published target = tcp::publishedBy(pair_->peer(1));
    std::memcpy(h.token, token ? token : target.token, tcp::kTokenBytes);
    uint8_t buf[tcp::kHelloBytes];
    tcp::encodeHello(h, buf);
    int fd = dial(pair_->peer(1));
    EXPECT_GE(fd, 0);
    sendAll(fd, buf, sizeof(buf));
    return fd;
  }

  void sendFrame(int fd, FrameHeader f, const std::string& payload = "") {
    uint8_t buf[tcp::kFrameHeaderBytes];
    tcp::encodeFrame(f, buf);
    sendAll(fd, buf, sizeof(buf));
    if (!payload.empty()) sendAll(fd, payload.data(), payload.size());
  }

  // Waits until `c` reports an error; returns its message.
  std::string awaitFailure(transport::Connection& c, int ms = 10000) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    std::string why;
    while (std::chrono::steady_clock::now() < end) {
      if (c.health(&why) != Status::kSuccess) {
        // A peer that failed resets its sockets (poison); one that only closed has ended.
        EXPECT_TRUE(c.poisoned() || c.peerEnded());
        return why;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ADD_FAILURE() << "connection never failed";
    return "";
  }

  // A real connection on a fresh channel still works.
  void expectOthersFine() {
    auto c = pair_->connect(100 + fresh_++);
    void* p = nullptr;
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!(p = c.first->sendSlotFor(5))) ASSERT_LT(std::chrono::steady_clock::now(), end);
    std::memcpy(p, "hello", 5);
    c.first->post(5, 42);
    uint32_t bytes = 0, tag = 0;
    const void* q = nullptr;
    while (!(q = c.second->recvSlot(&bytes, &tag))) {
      ASSERT_LT(std::chrono::steady_clock::now(), end);
      std::this_thread::yield();
    }
    EXPECT_EQ(bytes, 5u);
    EXPECT_EQ(tag, 42u);
    EXPECT_EQ(std::memcmp(q, "hello", 5), 0);
    c.second->release();
    std::string why;
    EXPECT_EQ(c.second->health(&why), Status::kSuccess) << why;
  }

  std::unique_ptr<TransportPair> pair_;
  int fresh_ = 0;
};

FrameHeader frame(uint64_t seq, uint32_t total, uint32_t offset, uint32_t length, uint8_t part = 0,
                  uint8_t parts = 1) {
  FrameHeader f;
  f.seq = seq;
  f.total = total;
  f.offset = offset;
  f.length = length;
  f.part = part;
  f.parts = parts;
  f.tag = 9;
  return f;
}

TEST_F(HostilePeer, WellFormedFramesFromAHandMadePeerArrive) {
  int fd = impersonate(3);
  auto conn = pair_->transport().connect(pair_->ctx(1), 0, 3);
  sendFrame(fd, frame(0, 6, 0, 6), "abcdef");
  // One message in two stripes, the second first.
  sendFrame(fd, frame(1, 8, 4, 4, 1, 2), "5678");
  sendFrame(fd, frame(1, 8, 0, 4, 0, 2), "1234");
  uint32_t bytes = 0, tag = 0;
  const void* p = nullptr;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(p = conn->recvSlot(&bytes, &tag))) ASSERT_LT(std::chrono::steady_clock::now(), end);
  EXPECT_EQ(std::string(static_cast<const char*>(p), bytes), "abcdef");
  conn->release();
  while (!(p = conn->recvSlot(&bytes, &tag))) ASSERT_LT(std::chrono::steady_clock::now(), end);
  EXPECT_EQ(std::string(static_cast<const char*>(p), bytes), "12345678");
  conn->release();
  ::close(fd);
  std::string why = awaitFailure(*conn);
  EXPECT_NE(why.find("closed the connection"), std::string::npos) << why;
}

TEST_F(HostilePeer, PeerClosingMidMessage) {
  int fd = impersonate(1);
  auto conn = pair_->transport().connect(pair_->ctx(1), 0, 1);
  sendFrame(fd, frame(0, 1000, 0, 1000), std::string(500, 'x'));  // half the payload
  ::close(fd);
  std::string why = awaitFailure(*conn);
  EXPECT_NE(why.find("middle of a message"), std::string::npos) << why;
  uint32_t bytes, tag;
  EXPECT_EQ(conn->recvSlot(&bytes, &tag), nullptr);
  expectOthersFine();
}

TEST_F(HostilePeer, GarbageFailsOnlyItsConnection) {
  auto good = pair_->connect(0);
  int fd = impersonate(2);
  auto conn = pair_->transport().connect(pair_->ctx(1), 0, 2);
  std::string junk(64, '\xab');
  sendAll(fd, junk.data(), junk.size());
  std::string why = awaitFailure(*conn);
  EXPECT_NE(why.find("garbage"), std::string::npos) << why;
  EXPECT_TRUE(closedByPeer(fd, 5000));
  ::close(fd);
  std::string ok;
  EXPECT_EQ(good.second->health(&ok), Status::kSuccess) << ok;
  EXPECT_FALSE(good.second->poisoned());
  expectOthersFine();
}

struct BadFrame {
  const char* name;
  FrameHeader (*make)(uint64_t slotBytes);
  const char* expect;
};

TEST_F(HostilePeer, BadFramesAreErrors) {
  const BadFrame cases[] = {
      {"oversized", [](uint64_t s) { return frame(0, uint32_t(s + 1), 0, 1); }, "oversized"},
      {"outside", [](uint64_t) { return frame(0, 100, 90, 20); }, "outside"},
      {"huge-seq", [](uint64_t) { return frame(1ull << 40, 10, 0, 10); }, "out of order"},
      {"bad-part", [](uint64_t) { return frame(0, 10, 0, 10, 3, 2); }, "stripe"},
  };
  int channel = 10;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    int fd = impersonate(channel);
    auto conn = pair_->transport().connect(pair_->ctx(1), 0, channel);
    ++channel;
    sendFrame(fd, c.make(pair_->slotBytes()), std::string(20, 'y'));
    std::string why = awaitFailure(*conn);
    EXPECT_NE(why.find(c.expect), std::string::npos) << why;
    ::close(fd);
  }
  // Stripes of one message that disagree, and a stripe sent twice.
  {
    int fd = impersonate(20);
    auto conn = pair_->transport().connect(pair_->ctx(1), 0, 20);
    sendFrame(fd, frame(0, 100, 0, 50, 0, 2), std::string(50, 'a'));
    sendFrame(fd, frame(0, 200, 50, 50, 1, 2), std::string(50, 'b'));
    EXPECT_NE(awaitFailure(*conn).find("disagree"), std::string::npos);
    ::close(fd);
  }
  {
    int fd = impersonate(21);
    auto conn = pair_->transport().connect(pair_->ctx(1), 0, 21);
    sendFrame(fd, frame(0, 100, 0, 50, 0, 2), std::string(50, 'a'));
    sendFrame(fd, frame(0, 100, 0, 50, 0, 2), std::string(50, 'a'));
    EXPECT_NE(awaitFailure(*conn).find("duplicate"), std::string::npos);
    ::close(fd);
  }
  expectOthersFine();
}

TEST_F(HostilePeer, StrangersAreDropped) {
  // Random bytes, a hello with the wrong token, a hello for a communicator that is not here, and
  // a connection that says nothing: all closed by the listener, nothing else disturbed.
  {
    int fd = dial(pair_->peer(1));
    ASSERT_GE(fd, 0);
    std::mt19937 rng(3);
    std::string junk(64, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    sendAll(fd, junk.data(), junk.size());
    EXPECT_TRUE(closedByPeer(fd, 5000));
    ::close(fd);
  }
  {
    uint8_t wrong[tcp::kTokenBytes] = {1, 2, 3};
    int fd = impersonate(5, wrong);
    EXPECT_TRUE(closedByPeer(fd, 5000));
    ::close(fd);
  }
  {
    Hello h;
    h.commHash = 12345;
    h.srcRank = 0;
    h.dstRank = 1;
    h.sockets = 1;
    uint8_t buf[tcp::kHelloBytes];
    tcp::encodeHello(h, buf);
    int fd = dial(pair_->peer(1));
    sendAll(fd, buf, sizeof(buf));
    EXPECT_TRUE(closedByPeer(fd, 5000));
    ::close(fd);
  }
  int silent = dial(pair_->peer(1));
  ASSERT_GE(silent, 0);
  expectOthersFine();
  ::close(silent);
}

}  // namespace
}  // namespace weft::test
