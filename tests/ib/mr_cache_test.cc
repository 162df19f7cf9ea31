// The registration cache's range logic (transports/ib/mr_cache.h) with counting fake verbs:
// hits, merges, LRU retention, held regions outliving invalidation, user registrations.
#include "transports/ib/mr_cache.h"

#include <gtest/gtest.h>

#include <map>

namespace weft::ib {
namespace {

constexpr size_t kPage = 4096;

// Fake ibv_reg_mr / ibv_dereg_mr: records every registration that is live.
struct FakeVerbs {
  int regs = 0, deregs = 0;
  size_t regBytes = 0;  // summed over every registration
  std::map<void*, std::pair<uintptr_t, size_t>> live;
  uintptr_t failAt = 0;  // a registration covering this address fails
  uint32_t nextKey = 1;

  MrOps ops() {
    return {[this](uintptr_t base, size_t bytes, std::string* why) {
              if (failAt && failAt >= base && failAt < base + bytes) {
                *why = "fake failure";
                return MrKeys{};
              }
              EXPECT_EQ(base % kPage, 0u);
              EXPECT_EQ(bytes % kPage, 0u);
              ++regs;
              regBytes += bytes;
              void* h = new int(0);
              live[h] = {base, bytes};
              const uint32_t k = nextKey++;
              return MrKeys{h, k, k + 1000};
            },
            [this](void* h) {
              ++deregs;
              ASSERT_EQ(live.erase(h), 1u) << "deregistered twice or never registered";
              delete static_cast<int*>(h);
            }};
  }
};

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(MrCache, SubRangeOfAHeldRegionIsAHit) {
  FakeVerbs f;
  MrCache c(f.ops(), kPage, 0);
  std::string why;
  const auto* r = c.acquire(at(0x10010), 3 * kPage, &why);
  ASSERT_NE(r, nullptr) << why;
  EXPECT_EQ(r->base, 0x10000u);
  EXPECT_EQ(r->bytes, 4 * kPage);  // 0x10010 + 3 pages ends inside the fourth page
  const auto* sub = c.acquire(at(0x12000), 100, &why);
  EXPECT_EQ(sub, r);
  EXPECT_EQ(f.regs, 1);
  c.release(sub);
  c.release(r);
  // Nothing retained by default: the region goes once unheld.
  EXPECT_EQ(f.deregs, 1);
  EXPECT_TRUE(f.live.empty());
}

TEST(MrCache, OverlapWithAHeldRegionLeavesItInPlace) {
  FakeVerbs f;
  MrCache c(f.ops(), kPage, 1 << 30);
  std::string why;
  const auto* a = c.acquire(at(0x20010), 2 * kPage, &why);  // pages 0x20000..0x22fff
  const auto* b = c.acquire(at(0x22010), 2 * kPage, &why);  // the next slice shares a page
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->base, 0x22000u);
  EXPECT_EQ(b->bytes, 3 * kPage) << "only its own pages: a is held, so not merged";
  EXPECT_EQ(c.validRegions(), 2u);
  EXPECT_EQ(c.acquire(at(0x20100), 100, &why), a) << "a still takes hits";
  EXPECT_EQ(c.acquire(at(0x23000), 100, &why), b);
  EXPECT_EQ(c.acquire(at(0x22100), 100, &why), b) << "the shared page: the nearest base";
  for (const auto* r : {a, b, a, b, b}) c.release(r);
  EXPECT_EQ(f.regs, 2);
  // Both idle now: a range across them registers their union once.
  const auto* u = c.acquire(at(0x21000), 3 * kPage, &why);
  EXPECT_EQ(u->base, 0x20000u);
  EXPECT_EQ(u->bytes, 5 * kPage);
  EXPECT_EQ(f.deregs, 2);
  c.release(u);
  EXPECT_EQ(c.validRegions(), 1u);
}

TEST(MrCache, HeldRegionInsideANewOneStaysLiveUntilReleased) {
  FakeVerbs f;
  MrCache c(f.ops(), kPage, 1 << 30);
  std::string why;
  const auto* a = c.acquire(at(0x30000), kPage, &why);
  const auto* big = c.acquire(at(0x2f000), 4 * kPage, &why);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->base, 0x2f000u);
  EXPECT_EQ(c.validRegions(), 1u) << "a no longer takes hits";
  EXPECT_EQ(c.liveRegistrations(), 2u) << "but a transfer holds it";
  EXPECT_EQ(c.acquire(at(0x30000), 8, &why), big);
  c.release(a);
  EXPECT_EQ(f.deregs, 1);
  c.release(big);
  c.release(big);
  EXPECT_EQ(c.liveRegistrations(), 1u);
}

// A stream of slices that share boundary pages, each held until the next two are posted:
// every slice is registered once, never the stream's past again.
TEST(MrCache, StreamRegistersEachSliceOnce) {
  FakeVerbs f;
  MrCache c(f.ops(), kPage, 0);
  std::string why;
  const size_t slice = 32 * kPage;
  std::vector<const MrCache::Region*> held;
  for (int k = 0; k < 64; ++k) {
    const auto* r = c.acquire(at(0x1000010 + k * slice), slice, &why);
    ASSERT_NE(r, nullptr);
    held.push_back(r);
    if (held.size() > 2) {
      c.release(held.front());
      held.erase(held.begin());
    }
  }
  for (const auto* r : held) c.release(r);
  EXPECT_EQ(f.regs, 64);
  EXPECT_EQ(f.regBytes, 64 * (slice + kPage)) << "each slice's own pages, once";
  EXPECT_TRUE(f.live.empty());
}

TEST(MrCache, UnionSpansSeveralRegions) {
  FakeVerbs f;
  MrCache c(f.ops(), kPage, 1 << 30);
  std::string why;
  for (uintptr_t base : {0x40000, 0x43000, 0x46000}) c.release(c.acquire(at(base), kPage, &why));
  EXPECT_EQ(c.validRegions(), 3u);
  const auto* all = c.acquire(at(0x40800), 0x6000, &why);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->base, 0x40000u);
  EXPECT_EQ(all->bytes, 7 * kPage);
  EXPECT_EQ(c.validRegions(), 1u);
  EXPECT_EQ(f.deregs, 3);
  c.release(all);
  EXPECT_EQ(f.live.size(), 1u);
}

TEST(MrCache, LeastRecentlyUsedIdleRegionsGoFirst) {
  FakeVerbs f;
  MrCache c(f.ops(), kPage, 3 * kPage);
  std::string why;
  for (uintptr_t base : {0x100000, 0x200000, 0x300000}) c.release(c.acquire(at(base), 1, &why));
  EXPECT_EQ(f.deregs, 0);
  c.release(c.acquire(at(0x100000), 1, &why));  // now the most recent
  EXPECT_EQ(f.regs, 3);
  c.release(c.acquire(at(0x400000), 1, &why));  // over the budget: 0x200000 goes
  EXPECT_EQ(f.deregs, 1);
  c.release(c.acquire(at(0x200000), 1, &why));
  EXPECT_EQ(f.regs, 5) << "0x200000 was evicted";
  c.release(c.acquire(at(0x100000), 1, &why));
  EXPECT_EQ(f.regs, 5) << "0x100000 was kept";
  // A held region is never evicted, whatever the budget.
  const auto* held = c.acquire(at(0x500000), 64 * kPage, &why);
  c.setRetainedBytes(0);
  EXPECT_EQ(f.live.size(), 1u);
  EXPECT_EQ(f.live.begin()->second.first, 0x500000u);
  c.release(held);
  EXPECT_TRUE(f.live.empty());
}

TEST(MrCache, UserRegistrationStaysUntilDeregisteredThenIsInvalid) {
  FakeVerbs f;
  MrCache c(f.ops(), kPage, 0);
  std::string why;
  int commA = 0, commB = 0;
  ASSERT_TRUE(c.registerOwned(&commA, at(0x800000), 16 * kPage, &why));
  ASSERT_TRUE(c.registerOwned(&commA, at(0x800000), 16 * kPage, &why));  // another connection
  ASSERT_TRUE(c.registerOwned(&commB, at(0x800000), 16 * kPage, &why));
  EXPECT_EQ(f.regs, 1);
  c.release(c.acquire(at(0x804000), kPage, &why));
  EXPECT_EQ(f.deregs, 0) << "owned regions stay when unheld";
  c.deregisterOwned(&commA, at(0x800000), 16 * kPage);
  EXPECT_EQ(f.deregs, 0) << "commB still owns it";
  const auto* held = c.acquire(at(0x800000), kPage, &why);
  c.deregisterOwned(&commB, at(0x800000), 16 * kPage);
  EXPECT_EQ(f.deregs, 0) << "a posted transfer still uses it";
  // Invalid: the next request registers afresh (the memory may have been freed and reused).
  const auto* again = c.acquire(at(0x800000), kPage, &why);
  EXPECT_NE(again, held);
  EXPECT_EQ(f.regs, 2);
  c.release(held);
  EXPECT_EQ(f.deregs, 1);
  c.release(again);
  EXPECT_TRUE(f.live.empty());
}

TEST(MrCache, MergingKeepsOwnership) {
  FakeVerbs f;
  MrCache c(f.ops(), kPage, 0);
  std::string why;
  int comm = 0;
  ASSERT_TRUE(c.registerOwned(&comm, at(0x900000), 2 * kPage, &why));
  c.release(c.acquire(at(0x901000), 4 * kPage, &why));  // grows the owned region
  EXPECT_EQ(c.validRegions(), 1u);
  EXPECT_EQ(f.live.size(), 1u) << "the union is owned, so it stays";
  c.deregisterOwned(&comm, at(0x900000), 2 * kPage);
  EXPECT_TRUE(f.live.empty());
}

TEST(MrCache, FailedRegistrationLeavesTheCacheAsItWas) {
  FakeVerbs f;
  MrCache c(f.ops(), kPage, 1 << 20);
  std::string why;
  c.release(c.acquire(at(0xa00000), kPage, &why));
  f.failAt = 0xa03000;
  EXPECT_EQ(c.acquire(at(0xa00000), 4 * kPage, &why), nullptr);
  EXPECT_EQ(why, "fake failure");
  EXPECT_EQ(c.validRegions(), 1u);
  EXPECT_EQ(c.acquire(at(0), 10, &why), nullptr);
  EXPECT_EQ(c.acquire(at(UINTPTR_MAX - 10), 100, &why), nullptr);
  EXPECT_NE(c.acquire(at(0xa00100), 10, &why), nullptr);
  EXPECT_EQ(f.regs, 1);
}

}  // namespace
}  // namespace weft::ib
