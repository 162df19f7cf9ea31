#include "src/core/scratch_pool.h"

#include <gtest/gtest.h>

#include <cstring>

namespace weft::core {
namespace {

TEST(ScratchPool, ReusesAReturnedBuffer) {
  auto pool = std::make_shared<ScratchPool>();
  char* first = nullptr;
  {
    auto a = pool->take(1 << 20);
    first = a.get();
    std::memset(a.get(), 1, 1 << 20);
  }
  EXPECT_EQ(pool->idleBuffers(), 1u);
  auto b = pool->take(1000);  // smaller calls fit in it too
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(pool->idleBuffers(), 0u);
}

TEST(ScratchPool, CallsInFlightGetDistinctBuffers) {
  auto pool = std::make_shared<ScratchPool>();
  auto a = pool->take(4096), b = pool->take(4096);
  EXPECT_NE(a.get(), b.get());
  auto big = pool->take(1 << 16);
  a.reset();
  auto c = pool->take(1 << 16);  // the idle one is too small: a new one
  EXPECT_NE(c.get(), big.get());
  EXPECT_EQ(pool->idleBuffers(), 1u);
}

TEST(ScratchPool, KeepsAFewLargestIdleBuffers) {
  auto pool = std::make_shared<ScratchPool>();
  std::vector<std::shared_ptr<char>> held;
  for (size_t k = 1; k <= 8; ++k) held.push_back(pool->take(k * 4096));
  held.clear();
  EXPECT_EQ(pool->idleBuffers(), 4u);
  auto big = pool->take(8 * 4096);  // the largest stayed
  EXPECT_EQ(pool->idleBuffers(), 3u);
}

TEST(ScratchPool, BufferOutlivesItsPool) {
  auto pool = std::make_shared<ScratchPool>();
  auto a = pool->take(4096);
  pool.reset();
  std::memset(a.get(), 0, 4096);  // still valid; freed when dropped
  a.reset();
}

}  // namespace
}  // namespace weft::core
