// The LL protocol's shared code on the host: a writer and a reader thread exchange messages of
// odd sizes through one buffer of lines, reused round after round without clearing; every byte
// must arrive from its own round.
#include "src/cuda/ll_protocol.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace weft::ll {
namespace {

using Clock = std::chrono::steady_clock;

unsigned char byteOf(uint32_t round, size_t i) {
  return static_cast<unsigned char>(round * 31 + i * 7);
}

TEST(LlProtocol, LinesAreStaleUntilBothHalvesCarryTheFlag) {
  Line line{};
  uint64_t payload = 0;
  EXPECT_FALSE(loadLine(&line, 1, &payload));
  storeLine(&line, 0x1122334455667788ull, 1);
  ASSERT_TRUE(loadLine(&line, 1, &payload));
  EXPECT_EQ(payload, 0x1122334455667788ull);
  EXPECT_FALSE(loadLine(&line, 2, &payload));
  // A line whose second half is still last round's is not ready.
  __atomic_store_n(&line.lo, 0xAAull | (uint64_t(2) << 32), __ATOMIC_RELAXED);
  EXPECT_FALSE(loadLine(&line, 2, &payload));
}

TEST(LlProtocol, PayloadPackingKeepsEveryByteOfAnOddMessage) {
  const size_t bytes = 13;
  unsigned char src[bytes], dst[bytes] = {};
  for (size_t i = 0; i < bytes; ++i) src[i] = byteOf(5, i);
  std::vector<Line> lines(linesFor(bytes));
  ASSERT_EQ(lines.size(), 2u);
  write(lines.data(), src, bytes, 9, 0, 1);
  for (size_t i = 0; i < lines.size(); ++i) {
    uint64_t v;
    ASSERT_TRUE(loadLine(&lines[i], 9, &v));
    unpackPayload(dst, bytes, i, v);
  }
  for (size_t i = 0; i < bytes; ++i) EXPECT_EQ(dst[i], src[i]) << i;
  uint64_t tail;
  ASSERT_TRUE(loadLine(&lines[1], 9, &tail));
  EXPECT_EQ(tail >> 40, 0u);  // bytes past the message are zero
}

TEST(LlProtocol, TwoThreadsExchangeRoundsThroughOneBuffer) {
  const size_t bytes = 1001;  // not a multiple of the line payload
  const uint32_t rounds = 300;
  std::vector<Line> lines(linesFor(bytes));
  std::atomic<uint32_t> consumed{0};  // rounds the reader finished: the writer's back-pressure
  std::atomic<bool> failed{false};
  const auto deadline = Clock::now() + std::chrono::seconds(30);

  std::thread writer([&] {
    std::vector<unsigned char> msg(bytes);
    for (uint32_t round = 1; round <= rounds && !failed; ++round) {
      while (consumed.load(std::memory_order_acquire) + 1 < round) {
        if (Clock::now() > deadline) return failed.store(true);
        std::this_thread::yield();
      }
      for (size_t i = 0; i < bytes; ++i) msg[i] = byteOf(round, i);
      // Odd lines first, then even ones: the reader must cope with lines arriving out of order.
      write(lines.data(), msg.data(), bytes, round, 1, 2);
      write(lines.data(), msg.data(), bytes, round, 0, 2);
    }
  });

  std::vector<unsigned char> got(bytes);
  size_t wrong = 0;
  for (uint32_t round = 1; round <= rounds && !failed; ++round) {
    for (size_t i = 0; i < lines.size(); ++i) {
      uint64_t v = 0;
      while (!loadLine(&lines[i], round, &v)) {
        if (Clock::now() > deadline) {
          failed = true;
          break;
        }
        std::this_thread::yield();
      }
      if (failed) break;
      unpackPayload(got.data(), bytes, i, v);
    }
    for (size_t i = 0; i < bytes && !failed; ++i) wrong += got[i] != byteOf(round, i);
    consumed.store(round, std::memory_order_release);
  }
  writer.join();
  EXPECT_FALSE(failed) << "timed out";
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace weft::ll
