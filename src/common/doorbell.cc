#include "src/common/doorbell.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <mutex>

#include "src/common/clock.h"

namespace weft {

static long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  // Not FUTEX_PRIVATE: doorbells are shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

namespace {
// Ringers need a store-load fence between publishing and reading `sleepers` (Dekker). With
// membarrier's global expedited command the sleeper pays for it instead: it forces a full
// barrier on every CPU running a registered process before it re-polls, so a ringer in a
// registered process needs only a compiler barrier. gLightRing: this process registered.
// gHeavySleep: the kernel has the command, so sleepers issue it (for other processes' ringers).
std::atomic<bool> gLightRing{false};
std::atomic<bool> gHeavySleep{false};

std::mutex gBarrierMu;
bool gBarrierTried = false;

long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }
}  // namespace

void enableAsymmetricDoorbells(bool enable) {
  std::lock_guard<std::mutex> lock(gBarrierMu);
  if (gBarrierTried) return;
  gBarrierTried = true;
  // A forked child is a new address space the registration may not cover: it starts over.
  static bool atfork = pthread_atfork(nullptr, nullptr, [] {
                         gLightRing.store(false);
                         gBarrierTried = false;
                       }) == 0;
  (void)atfork;
  if (!enable) return;
  const long q = membarrier(MEMBARRIER_CMD_QUERY);
  if (q < 0 || !(q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) ||
      !(q & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED))
    return;
  gHeavySleep.store(true);
  if (membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0) gLightRing.store(true);
}

void Doorbell::ring() {
  if (gLightRing.load(std::memory_order_relaxed))
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint32_t waiting = sleepers.load(std::memory_order_relaxed);
  if (waiting == 0) return;
  if ((waiting & ~kParked) != 0) {
    seq.fetch_add(1, std::memory_order_seq_cst);
    futex(&seq, FUTEX_WAKE, INT32_MAX, nullptr);
  } else if (seq.load(std::memory_order_relaxed) == parkedSeq.load(std::memory_order_relaxed)) {
    // Parked and awake: one bump since the park is all an observer asks (mayMove), so the
    // read-modify-write is not repeated for every message a busy sender posts.
    seq.fetch_add(1, std::memory_order_seq_cst);
  }
}

void Doorbell::park() {
  // The seq first: a ringer that sees the bit compares with this park's.
  parkedSeq.store(seq.load(std::memory_order_relaxed), std::memory_order_relaxed);
  sleepers.fetch_or(kParked, std::memory_order_seq_cst);
}

// Only the owner writes `sleepers`, so a plain store will do.
void Doorbell::unpark() {
  sleepers.store(sleepers.load(std::memory_order_relaxed) & ~kParked, std::memory_order_release);
}

bool Doorbell::mayMove() const {
  const uint32_t waiting = sleepers.load(std::memory_order_acquire);
  if ((waiting & kParked) == 0) return (waiting & ~kParked) == 0;  // asleep: it cannot run
  return seq.load(std::memory_order_relaxed) != parkedSeq.load(std::memory_order_acquire);
}

uint32_t Doorbell::announce() {
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (gHeavySleep.load(std::memory_order_relaxed)) membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
  return seq.load(std::memory_order_seq_cst);
}

void Doorbell::sleep(uint32_t seen, uint64_t timeoutNs) {
  timespec ts{static_cast<time_t>(timeoutNs / 1000000000ull),
              static_cast<long>(timeoutNs % 1000000000ull)};
  futex(&seq, FUTEX_WAIT, seen, &ts);
}

void Doorbell::retire() { sleepers.fetch_sub(1, std::memory_order_seq_cst); }

bool Backoff::spin() {
  if (spins_ == 0) spinStartNs_ = nowNs();
  ++spins_;
  if (sharedCores_) {
    if (nowNs() - spinStartNs_ >= yieldNs_) return false;
    sched_yield();
    return true;
  }
  // A short pause between polls: the data lands mid-pause otherwise, and a batch of pauses is
  // a fair share of a sub-microsecond round trip. No yield: with a core per rank it is a
  // wasted system call.
  cpuRelax();
  cpuRelax();
  if ((spins_ & 63) != 0) return true;
  return nowNs() - spinStartNs_ < spinNs_;
}

}  // namespace weft
