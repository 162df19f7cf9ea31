// Doorbells between two processes: no wake-up is lost, with the asymmetric (membarrier) fence
// where the kernel has it and with a fence per ring otherwise.
#include "src/common/doorbell.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>

#include "src/common/clock.h"

namespace weft {
namespace {

struct Shared {
  Doorbell bell[2];
  std::atomic<uint64_t> turn{0};
  std::atomic<uint32_t> slowWaits{0};
};

// Waits until `turn` reaches `want`, spinning only briefly so most waits go through the sleep
// path; a wait that sleeps long past the value's arrival is a lost wake-up.
void waitFor(Shared* s, int me, uint64_t want) {
  for (int spin = 0; spin < 20; ++spin)
    if (s->turn.load(std::memory_order_acquire) >= want) return;
  while (s->turn.load(std::memory_order_acquire) < want) {
    uint32_t seen = s->bell[me].announce();
    if (s->turn.load(std::memory_order_acquire) < want) {
      uint64_t t0 = nowNs();
      s->bell[me].sleep(seen, 2000ull * 1000 * 1000);
      if (nowNs() - t0 > 500ull * 1000 * 1000 && s->turn.load() >= want) s->slowWaits++;
    }
    s->bell[me].retire();
  }
}

void play(Shared* s, int me, int rounds) {
  enableAsymmetricDoorbells(true);
  std::minstd_rand rng(me + 1);
  for (int r = 0; r < rounds; ++r) {
    const uint64_t mine = 2 * static_cast<uint64_t>(r) + me;  // parent moves on even turns
    waitFor(s, me, mine);
    // A little work first, so the peer is sometimes still spinning and sometimes asleep.
    for (uint32_t i = rng() % 2000; i > 0; --i) cpuRelax();
    s->turn.store(mine + 1, std::memory_order_release);
    s->bell[1 - me].ring();
  }
}

void pingPong(const char* asymmetric) {
  setenv("WEFT_ASYMMETRIC_FENCE", asymmetric, 1);
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* s = new (mem) Shared;
  const int rounds = 5000;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    play(s, 1, rounds);
    _exit(0);
  }
  play(s, 0, rounds);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(s->turn.load(), 2ull * rounds);
  EXPECT_EQ(s->slowWaits.load(), 0u) << "lost wake-ups";
  munmap(mem, sizeof(Shared));
}

// Each test forks, and the child registers anew (enableAsymmetricDoorbells after fork).
TEST(Doorbell, NoLostWakeupsBetweenProcesses) { pingPong("1"); }

TEST(Doorbell, NoLostWakeupsWithAFencePerRing) {
  if (fork() == 0) {  // a fresh process, so the setting is read before anything registered
    ::testing::GTEST_FLAG(break_on_failure) = false;
    pingPong("0");
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  wait(&status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// What a rank sharing the owner's core reads from its doorbell: an owner that does not park is
// never known to be busy; one that parks is busy between waits; a parked one may move on once
// something rang since it parked, and rings while it sleeps still wake it.
TEST(Doorbell, ParkingTellsWhetherTheOwnerCanMoveOn) {
  Doorbell bell;
  EXPECT_FALSE(bell.busy());
  EXPECT_TRUE(bell.mayMove());
  bell.parks.store(1);
  EXPECT_TRUE(bell.busy());
  bell.park();
  EXPECT_FALSE(bell.busy());
  EXPECT_FALSE(bell.mayMove());
  bell.ring();
  EXPECT_TRUE(bell.mayMove());
  bell.ring();  // one bump a park is enough
  EXPECT_TRUE(bell.mayMove());
  bell.unpark();
  EXPECT_TRUE(bell.busy());
  EXPECT_TRUE(bell.mayMove());

  // Parked again, then asleep: a ring bumps seq past what announce() returned.
  bell.park();
  EXPECT_FALSE(bell.mayMove());
  const uint32_t seen = bell.announce();
  bell.ring();
  EXPECT_NE(bell.seq.load(), seen);
  EXPECT_TRUE(bell.mayMove());
  bell.retire();
  bell.unpark();
  EXPECT_EQ(bell.sleepers.load(), 0u);
}

}  // namespace
}  // namespace weft
