// Large by-reference messages copied by both ends: the receiver lands each one with land(), the
// sender calls assist() while it waits for the message to be consumed and writes the pieces it
// claims straight into the receiver's memory. Every byte must arrive exactly as sent, whoever
// copied it: over the in-process link (plain addresses) and over shm (a writable mapping of the
// receiver's memfd region), with cached and streaming stores and a ragged last piece.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/common/tuning.h"
#include "tests/conformance/memfd_region.h"
#include "tests/conformance/pair_harness.h"
#include "transports/base/capabilities.h"

namespace weft::test {
namespace {

// Shared copies in mode 2 (WEFT_SHARE_COPY=2): the receiver waits for the sender's first
// claim, and the sender's share is certain even when both threads share one busy core.
Tuning waitingForTheSender() {
  Tuning t;
  t.shareCopy = 2;
  return t;
}

uint8_t pattern(uint64_t i) { return static_cast<uint8_t>(i * 7 + (i >> 9) + 3); }

// Sends `sizes` by reference from `src` and lands them at the same offsets of `dst`; returns how
// many of the sender's assist() calls copied something.
int runMessages(TransportPair& pair, char* src, char* dst, const std::vector<uint32_t>& sizes) {
  auto c = pair.connect(0);
  transport::Connection& tx = *c.first;
  transport::Connection& rx = *c.second;
  transport::ReferenceSends& refs = *tx.referenceSends();
  transport::PeerMemory& txMem = *tx.peerMemory();
  transport::PeerMemory& rxMem = *rx.peerMemory();
  std::atomic<int> helped{0};
  std::atomic<bool> failed{false};
  std::thread sender([&] {
    uint64_t off = 0;
    for (size_t m = 0; m < sizes.size(); ++m) {
      if (!refs.peerCanRead(src + off, sizes[m])) {
        failed = true;
        return;
      }
      refs.postReference(src + off, sizes[m], static_cast<uint32_t>(m));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!refs.consumed(refs.postedCount())) {
        if (txMem.assist()) ++helped;
        if (std::chrono::steady_clock::now() > deadline) {
          failed = true;
          return;
        }
      }
      off += sizes[m];
    }
  });
  uint64_t off = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (size_t m = 0; m < sizes.size() && !failed;) {
    uint32_t bytes = 0, tag = 0;
    uint64_t remote = 0;
    bool present = false;
    const void* in = rx.recvMessage(&bytes, &tag, &remote, &present);
    if (!present) {
      EXPECT_LT(std::chrono::steady_clock::now(), deadline) << "stalled at message " << m;
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::yield();
      continue;
    }
    EXPECT_EQ(tag, m);
    EXPECT_EQ(bytes, sizes[m]);
    EXPECT_NE(in, nullptr) << "a by-reference message must be addressable here";
    if (!in) break;
    rxMem.land(dst + off, in, bytes, m % 2 ? Store::kStreaming : Store::kCached);
    rx.release();
    off += bytes;
    ++m;
  }
  sender.join();
  EXPECT_FALSE(failed) << "the sender could not post or saw no consumption";
  return helped.load();
}

class SharedCopy : public ::testing::TestWithParam<const char*> {};

TEST_P(SharedCopy, EveryByteArrivesWhoeverCopiedIt) {
  // 1 MiB messages (16 pieces), one with a ragged last piece, one just over two pieces.
  const std::vector<uint32_t> sizes = {1u << 20,         (1u << 20) + 4097, 1u << 20,
                                       (128u << 10) + 1, 3u << 20,          1u << 20};
  uint64_t total = 0;
  for (uint32_t s : sizes) total += s;
  MemfdRegion src(total + 4096), dst(total + 4096);
  for (uint64_t i = 0; i < total; ++i) src.data()[i] = static_cast<char>(pattern(i));
  TransportPair pair(GetParam(), 8, 128 << 10, waitingForTheSender());
  const int helped = runMessages(pair, src.data(), dst.data(), sizes);
  for (uint64_t i = 0; i < total; ++i)
    ASSERT_EQ(static_cast<uint8_t>(dst.data()[i]), pattern(i)) << "byte " << i;
  EXPECT_GT(helped, 0) << "the sender never copied a piece";
}

// A destination the sender cannot reach (shm: not a registered region) is copied by the
// receiver alone, and still whole.
TEST(SharedCopy, UnreachableDestinationIsCopiedByTheReceiver) {
  const std::vector<uint32_t> sizes = {1u << 20, (1u << 20) + 33};
  const uint64_t total = sizes[0] + sizes[1];
  MemfdRegion src(total);
  std::vector<char> dst(total, 0);
  for (uint64_t i = 0; i < total; ++i) src.data()[i] = static_cast<char>(pattern(i));
  TransportPair pair("shm", 8, 128 << 10, waitingForTheSender());
  EXPECT_EQ(runMessages(pair, src.data(), dst.data(), sizes), 0);
  for (uint64_t i = 0; i < total; ++i)
    ASSERT_EQ(static_cast<uint8_t>(dst[i]), pattern(i)) << "byte " << i;
}

INSTANTIATE_TEST_SUITE_P(Transports, SharedCopy, ::testing::Values("local", "shm"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace weft::test
