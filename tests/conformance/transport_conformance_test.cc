// One conformance suite for every transport: two ranks of one process connected through the
// transport under test (tcp goes through real sockets on this host), driven through the
// Connection interface the executor uses. Ordering, zero-byte and odd-sized messages, a 1 GiB
// stream, many connections in flight, a full FIFO, and poisoning.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/secret.h"
#include "tests/conformance/pair_harness.h"
#include "transports/shm/fifo.h"
#include "transports/tcp/link.h"

namespace weft::test {
namespace {

class Conformance : public ::testing::TestWithParam<const char*> {
 protected:
  // "tcp-striped": every message above 4 KiB split over four sockets.
  void SetUp() override {
    std::string name = GetParam();
    if (name == "tcp-striped") {
      setenv("NCCL_NSOCKS_PERTHREAD", "4", 1);
      setenv("WEFT_TCP_MIN_PART", "4096", 1);
      name = "tcp";
    }
    if (name == "ib" || name == "ib-qps") {
      // Real verbs: runs where an RDMA port is active (soft-RoCE in the vm tests' guests).
      if (std::none_of(transport::transports().begin(), transport::transports().end(),
                       [](transport::Transport* t) { return std::string(t->name()) == "ib"; }))
        GTEST_SKIP() << "this build has no ib transport (no <infiniband/verbs.h>)";
      if (getenv("WEFT_TEST_IB") == nullptr)
        GTEST_SKIP() << "set WEFT_TEST_IB=1 where an RDMA port is active (tests/vm does)";
      setenv("NCCL_NET", "IB", 1);  // ib then publishes the tcp endpoint its setup uses
      if (name == "ib-qps") setenv("NCCL_IB_QPS_PER_CONNECTION", "3", 1);
      name = "ib";
    }
    if (name == "net-plugin") {
      // Weft's own tcp through NCCL's plugin ABI: libnccl-net-weft.so loaded back.
      setenv("NCCL_NET_PLUGIN", WEFT_NET_PLUGIN_PATH, 1);
      setenv("NCCL_NET", "Weft", 1);
    }
    pair_ = std::make_unique<TransportPair>(name);
  }
  void TearDown() override {
    pair_.reset();
    unsetenv("NCCL_NSOCKS_PERTHREAD");
    unsetenv("WEFT_TCP_MIN_PART");
    unsetenv("NCCL_NET");
    unsetenv("NCCL_IB_QPS_PER_CONNECTION");
    unsetenv("NCCL_NET_PLUGIN");
  }
  std::unique_ptr<TransportPair> pair_;
};

std::string describeLink(transport::Connection& c) {
  auto* t = dynamic_cast<tcp::TcpConnection*>(&c);
  return t ? t->link().describe() : "";
}

// Byte i of message m: a pattern no two neighbouring messages share.
uint8_t patternByte(uint64_t m, uint64_t i) {
  return static_cast<uint8_t>(m * 131 + i * 7 + (i >> 8));
}

// Messages are written where sendSlotFor(bytes) says, as the executor does (memory FIFOs carry
// small payloads inside the slot descriptor).
// Sends `sizes[m]`-byte messages tagged m from rank 0 to 1 and checks each arrives in order,
// whole, with its tag, and (when `check`) with its bytes.
void stream(transport::Connection& tx, transport::Connection& rx,
            const std::vector<uint32_t>& sizes, bool check = true,
            std::chrono::seconds limit = std::chrono::seconds(60)) {
  size_t sent = 0, got = 0;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (got < sizes.size()) {
    bool moved = false;
    if (sent < sizes.size()) {
      if (void* slot = tx.sendSlotFor(sizes[sent])) {
        auto* p = static_cast<uint8_t*>(slot);
        if (check)
          for (uint32_t i = 0; i < sizes[sent]; ++i) p[i] = patternByte(sent, i);
        tx.post(sizes[sent], static_cast<uint32_t>(sent));
        ++sent;
        moved = true;
      }
    }
    uint32_t bytes = 0, tag = 0;
    if (const void* slot = rx.recvSlot(&bytes, &tag)) {
      ASSERT_EQ(tag, got) << "message out of order";
      ASSERT_EQ(bytes, sizes[got]) << "message " << got << " has the wrong size";
      if (check) {
        auto* p = static_cast<const uint8_t*>(slot);
        for (uint32_t i = 0; i < bytes; ++i)
          ASSERT_EQ(p[i], patternByte(got, i)) << "message " << got << " byte " << i;
      }
      rx.release();
      ++got;
      moved = true;
    }
    if (!moved) {
      std::string why;
      ASSERT_EQ(tx.health(&why), Status::kSuccess) << why;
      ASSERT_EQ(rx.health(&why), Status::kSuccess) << why;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "stalled after " << got << " messages";
      std::this_thread::yield();
    }
  }
}

TEST_P(Conformance, OrderAndContent) {
  auto c = pair_->connect(0);
  std::mt19937 rng(7);
  std::vector<uint32_t> sizes;
  for (int i = 0; i < 500; ++i) sizes.push_back(rng() % (pair_->slotBytes() + 1));
  stream(*c.first, *c.second, sizes);
  // And back the other way on the same connection.
  stream(*c.second, *c.first, sizes);
}

TEST_P(Conformance, ZeroByteMessages) {
  auto c = pair_->connect(0);
  stream(*c.first, *c.second, std::vector<uint32_t>(200, 0));
  stream(*c.first, *c.second, {0, 1, 0, 0, 5, 0});
}

TEST_P(Conformance, UnalignedSizes) {
  auto c = pair_->connect(0);
  const uint32_t s = static_cast<uint32_t>(pair_->slotBytes());
  stream(*c.first, *c.second,
         {1, 2, 3, 7, 13, 63, 65, 127, 129, 4095, 4097, 65535, 65537, 65599, s - 1, s, s - 63,
          99991 % s});
}

TEST_P(Conformance, FullFifoThenDrain) {
  auto c = pair_->connect(0);
  // Fill every send slot before the receiver looks: the sender must see "full", not overwrite.
  // (Over tcp "full" comes only once the kernel's socket buffers are full too.)
  int posted = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    void* slot = c.first->sendSlotFor(1000);
    if (!slot) break;
    std::memset(slot, posted, 1000);
    c.first->post(1000, static_cast<uint32_t>(posted++));
    ASSERT_LT(posted, 1000000) << "the FIFO never filled up";
  }
  EXPECT_GE(posted, 2);
  for (int m = 0; m < posted; ++m) {
    uint32_t bytes = 0, tag = 0;
    const void* slot = nullptr;
    while (!(slot = c.second->recvSlot(&bytes, &tag))) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::yield();
    }
    EXPECT_EQ(tag, static_cast<uint32_t>(m));
    EXPECT_EQ(bytes, 1000u);
    EXPECT_EQ(static_cast<const uint8_t*>(slot)[999], static_cast<uint8_t>(m));
    c.second->release();
  }
}

// Memory FIFOs: small (inline) messages need only a descriptor, so they run up to kMaxSlots
// ahead while the data slots (8 here) bound the larger ones; each kind sees "full" at its limit.
TEST(MemoryFifo, InlineMessagesRunAheadOfTheDataSlots) {
  for (const char* name : {"local", "shm"}) {
    SCOPED_TRACE(name);
    test::TransportPair pair(name, 8);
    auto c = pair.connect(0);
    uint32_t sent = 0;
    for (; c.first->sendSlotFor(8) != nullptr; ++sent) {
      std::memcpy(c.first->sendSlotFor(8), &sent, sizeof sent);
      c.first->post(sizeof sent, sent);
      ASSERT_LE(sent, transport::kMaxSlots);
    }
    EXPECT_EQ(sent, transport::kMaxSlots);
    // Drain half: data messages now fit in the data slots only.
    uint32_t got = 0;
    auto take = [&](uint32_t expectBytes) {
      uint32_t bytes = 0, tag = 0;
      const void* p = c.second->recvSlot(&bytes, &tag);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(tag, got);
      ASSERT_EQ(bytes, expectBytes);
      if (expectBytes == sizeof got) {
        uint32_t v = 0;
        std::memcpy(&v, p, sizeof v);
        ASSERT_EQ(v, got);
      }
      c.second->release();
      ++got;
    };
    for (uint32_t i = 0; i < transport::kMaxSlots / 2; ++i) take(sizeof got);
    uint32_t data = 0;
    for (; c.first->sendSlotFor(1000) != nullptr; ++data) {
      std::memset(c.first->sendSlotFor(1000), static_cast<int>(data), 1000);
      c.first->post(1000, sent++);
      ASSERT_LE(data, 8u);
    }
    EXPECT_EQ(data, 8u);
    // With the data slots full, an inline message still fits (descriptors are free).
    ASSERT_NE(c.first->sendSlotFor(8), nullptr);
    std::memcpy(c.first->sendSlotFor(8), &sent, sizeof sent);
    c.first->post(sizeof sent, sent++);
    while (got < transport::kMaxSlots) take(sizeof got);
    for (uint32_t i = 0; i < 8; ++i) take(1000);
    take(sizeof got);
    uint32_t bytes = 0, tag = 0;
    EXPECT_EQ(c.second->recvSlot(&bytes, &tag), nullptr);
  }
}

TEST_P(Conformance, OneGiBStream) {
  auto c = pair_->connect(0);
  const uint64_t total = 1ull << 30, slot = pair_->slotBytes();
  uint64_t sentBytes = 0, gotBytes = 0, seq = 0, rseq = 0;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::seconds(getenv("STALL_SECS") ? atoi(getenv("STALL_SECS")) : 240);
  while (gotBytes < total) {
    bool moved = false;
    if (sentBytes < total) {
      uint32_t n = static_cast<uint32_t>(std::min(slot, total - sentBytes));
      if (void* p = c.first->sendSlotFor(n)) {
        // 8-byte words hold their offset in the whole stream.
        auto* w = static_cast<uint64_t*>(p);
        for (uint32_t i = 0; i < n / 8; ++i) w[i] = sentBytes + 8ull * i;
        c.first->post(n, static_cast<uint32_t>(seq++));
        sentBytes += n;
        moved = true;
      }
    }
    uint32_t bytes = 0, tag = 0;
    if (const void* p = c.second->recvSlot(&bytes, &tag)) {
      ASSERT_EQ(tag, static_cast<uint32_t>(rseq++));
      auto* w = static_cast<const uint64_t*>(p);
      for (uint32_t i = 0; i < bytes / 8; ++i)
        ASSERT_EQ(w[i], gotBytes + 8ull * i) << "at byte " << gotBytes + 8ull * i;
      gotBytes += bytes;
      c.second->release();
      moved = true;
    }
    if (!moved) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "stalled at " << gotBytes << ": " << describeLink(*c.first) << " | "
          << describeLink(*c.second);
      std::this_thread::yield();
    }
  }
}

TEST_P(Conformance, ManyConnectionsInFlight) {
  // 16 channels, every one with a full FIFO at once, drained in an order unrelated to posting.
  const int kChannels = 16;
  std::vector<
      std::pair<std::unique_ptr<transport::Connection>, std::unique_ptr<transport::Connection>>>
      cs;
  for (int ch = 0; ch < kChannels; ++ch) cs.push_back(pair_->connect(ch));
  const int kPerChannel = 40;
  std::vector<int> sent(kChannels, 0), got(kChannels, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int done = 0;
  uint32_t round = 0;
  while (done < kChannels) {
    ++round;
    for (int ch = 0; ch < kChannels; ++ch) {
      auto& [tx, rx] = cs[ch];
      while (sent[ch] < kPerChannel) {
        uint32_t n = static_cast<uint32_t>((ch * 977 + sent[ch] * 131) % pair_->slotBytes());
        void* p = tx->sendSlotFor(n);
        if (!p) break;
        std::memset(p, ch + sent[ch], n);
        tx->post(n, static_cast<uint32_t>(ch * 1000 + sent[ch]));
        ++sent[ch];
      }
    }
    // Receive from the channels in reverse, and only every other round from odd channels.
    for (int ch = kChannels - 1; ch >= 0; --ch) {
      if ((ch & 1) && (round & 1)) continue;
      auto& [tx, rx] = cs[ch];
      uint32_t bytes = 0, tag = 0;
      while (const void* p = rx->recvSlot(&bytes, &tag)) {
        uint32_t n = static_cast<uint32_t>((ch * 977 + got[ch] * 131) % pair_->slotBytes());
        ASSERT_EQ(tag, static_cast<uint32_t>(ch * 1000 + got[ch]));
        ASSERT_EQ(bytes, n);
        if (n) {
          ASSERT_EQ(static_cast<const uint8_t*>(p)[n - 1], static_cast<uint8_t>(ch + got[ch]));
        }
        rx->release();
        if (++got[ch] == kPerChannel) ++done;
      }
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::yield();
  }
}

TEST_P(Conformance, PoisonReachesThePeer) {
  auto c = pair_->connect(0);
  stream(*c.first, *c.second, {10, 20});
  c.second->poison();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!c.first->poisoned()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the peer never saw the poison";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, Conformance,
                         ::testing::Values("local", "shm", "tcp", "tcp-striped", "ib", "ib-qps",
                                           "net-plugin"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace weft::test
