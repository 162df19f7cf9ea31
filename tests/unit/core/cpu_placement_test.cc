#include "src/core/cpu_placement.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <thread>

#include "src/common/doorbell.h"

namespace weft {
namespace {

CpuMask cpus(std::initializer_list<int> list) {
  CpuMask m;
  for (int c : list) m.words[c / 64] |= 1ull << (c % 64);
  return m;
}

LocalRank rank(int r, uint64_t process, CpuMask mask) {
  LocalRank l;
  l.rank = r;
  l.processHash = process;
  l.mask = mask;
  return l;
}

TEST(CpuMask, CountsAndUnites) {
  CpuMask a = cpus({0, 1, 70}), b = cpus({1, 1023});
  EXPECT_EQ(a.count(), 3);
  a.unite(b);
  EXPECT_EQ(a.count(), 4);
  EXPECT_TRUE(a == cpus({0, 1, 70, 1023}));
  EXPECT_GE(CpuMask::ofThisProcess().count(), 1);
}

// Ranks bound one CPU each by a launcher use the union of their CPUs: not oversubscribed, and
// nothing is re-pinned (the masks differ from the union).
TEST(CpuPlacement, LauncherBoundRanksAreNotOversubscribedNorRepinned) {
  std::vector<LocalRank> local = {rank(0, 1, cpus({0})), rank(1, 2, cpus({1}))};
  PlacementResult r = placeRanksOnHost(local, 0, true, true);
  EXPECT_EQ(r.cpus, 2);
  EXPECT_FALSE(r.oversubscribed);
  EXPECT_EQ(r.pinnedCore, -1);
}

// (Ranks 1 and 2 share a process, so nothing is pinned here; coreForSlot() is tested below.)
TEST(CpuPlacement, MoreRanksThanTheirCpusAreOversubscribed) {
  std::vector<LocalRank> local = {rank(0, 1, cpus({0, 1})), rank(1, 2, cpus({0, 1})),
                                  rank(2, 2, cpus({0, 1}))};
  PlacementResult r = placeRanksOnHost(local, 2, true, true);
  EXPECT_EQ(r.cpus, 2);
  EXPECT_TRUE(r.oversubscribed);
  EXPECT_EQ(r.pinnedCore, -1);
}

// Slots spread evenly while they fit on the cores, else round-robin: ranks that share cores
// share them evenly, and neighbouring ranks sit on different cores.
TEST(CpuPlacement, SlotsSpreadOverCoresAndWrapRoundRobin) {
  EXPECT_EQ(coreForSlot(0, 2, 4), 0);
  EXPECT_EQ(coreForSlot(1, 2, 4), 2);
  EXPECT_EQ(coreForSlot(3, 4, 4), 3);
  const int expect[] = {0, 1, 0, 1, 0};
  for (int s = 0; s < 5; ++s) EXPECT_EQ(coreForSlot(s, 5, 2), expect[s]) << "slot " << s;
  int perCore[3] = {};
  for (int s = 0; s < 8; ++s) ++perCore[coreForSlot(s, 8, 3)];
  EXPECT_EQ(perCore[0], 3);
  EXPECT_EQ(perCore[1], 3);
  EXPECT_EQ(perCore[2], 2);
  EXPECT_EQ(coreForSlot(0, 4, 0), -1);
}

// One rank per process and more ranks than cores: pinned round-robin by default, left to the
// scheduler without pinShared (WEFT_PIN_SHARED=0).
TEST(CpuPlacement, RanksThatOutnumberTheCoresArePinnedUnlessToldNot) {
  CpuMask all = CpuMask::ofThisProcess();
  std::vector<LocalRank> local;
  for (int r = 0; r <= all.count(); ++r) local.push_back(rank(r, 100 + r, all));
  PlacementResult r;
  auto placeOnAThread = [&](bool pinShared) {
    forgetPinnedRank();  // whatever the tests before did
    std::thread t([&] { r = placeRanksOnHost(local, 1, true, pinShared); });
    t.join();
    forgetPinnedRank();
  };
  placeOnAThread(false);
  EXPECT_TRUE(r.oversubscribed);
  EXPECT_EQ(r.pinnedCore, -1);
  EXPECT_EQ(r.ranks, static_cast<int>(local.size()));
  placeOnAThread(true);
  EXPECT_TRUE(r.oversubscribed);
  EXPECT_GE(r.pinnedCore, 0);
}

// Ranks that are threads of one process: none is pinned.
TEST(CpuPlacement, SeveralRanksInOneProcessAreNotPinned) {
  CpuMask all = CpuMask::ofThisProcess();
  std::vector<LocalRank> local = {rank(0, 7, all), rank(1, 7, all)};
  EXPECT_EQ(placeRanksOnHost(local, 1, true, true).pinnedCore, -1);
}

TEST(CpuPlacement, RankNotOnThisHostDecidesNothing) {
  std::vector<LocalRank> local = {rank(0, 1, cpus({0}))};
  EXPECT_EQ(placeRanksOnHost(local, 5, true, true).cpus, 0);
}

// One rank per process, unbound, ranks fit the cores: the caller's thread is bound to one core.
TEST(CpuPlacement, SingleRankProcessIsPinnedToOneCore) {
  CpuMask all = CpuMask::ofThisProcess();
  if (all.count() < 2 || sysconf(_SC_NPROCESSORS_ONLN) < 2)
    GTEST_SKIP() << "needs at least 2 usable CPUs";
  std::vector<LocalRank> local = {rank(0, 1, all), rank(1, 2, all)};
  PlacementResult r;
  int boundCpus = -1;
  std::thread t([&] {
    r = placeRanksOnHost(local, 1, true, true);
    cpu_set_t set;
    CPU_ZERO(&set);
    pthread_getaffinity_np(pthread_self(), sizeof set, &set);
    boundCpus = CPU_COUNT(&set);
  });
  t.join();
  EXPECT_FALSE(r.oversubscribed);
  if (r.pinnedCore < 0) GTEST_SKIP() << "fewer cores than ranks here (hyperthreads only)";
  EXPECT_GE(r.pinnedCore, 0);
  EXPECT_GE(boundCpus, 1);
  EXPECT_LT(boundCpus, all.count());
  // Only the first communicator of a process pins.
  std::thread again([&] { EXPECT_EQ(placeRanksOnHost(local, 0, true, true).pinnedCore, -1); });
  again.join();
}

}  // namespace
}  // namespace weft
