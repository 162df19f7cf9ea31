// Waiting without burning a core: a doorbell is a 32-bit counter in (possibly shared) memory.
// Writers ring it after publishing; a waiter spins briefly with `pause`, yields, then sleeps on a
// futex, announcing itself first so writers only pay for a wake-up when someone sleeps.
#pragma once
#include <atomic>
#include <cstdint>

namespace weft {

struct Doorbell {
  std::atomic<uint32_t> seq{0};
  // Futex sleepers, plus kParked while the owner waits awake (see park()).
  std::atomic<uint32_t> sleepers{0};
  std::atomic<uint32_t> parkedSeq{0};  // seq when the owner last parked
  std::atomic<uint32_t> parks{0};      // 1: the owner parks when it waits (set at init)

  // Publish side: after making new state visible, bump seq if the owner is parked or asleep,
  // and wake it if asleep. The fast path (neither) is a fence and a load, no read-modify-write
  // on a shared line.
  void ring();

  // Sleep side, in this order: announce(), poll once more, then sleep(seen) only if that poll
  // found nothing, then retire(). A ring that races with the poll bumps seq, so sleep returns.
  uint32_t announce();
  void sleep(uint32_t seen, uint64_t timeoutNs);
  void retire();

  // Waiting awake, for ranks that share a core: park() after a poll that found nothing (then
  // poll once more), unpark() once one makes progress. The first ring after a park bumps seq,
  // so a rank on the same core can tell whether yielding to the owner would let it move
  // (mayMove) or only cost a context switch. A ring that misses the park is caught by the poll
  // after it, or, where the ringer's fence is light, by the yield the waiter still makes after
  // a while (WEFT_HOLD_US).
  void park();
  void unpark();
  // Whether a yield might let the owner run on: it is not parked (it is between polls, in the
  // caller's code or preempted) or something rang since it parked.
  bool mayMove() const;
  // Whether the owner is known to be between waits: it parks when it waits, and is not parked
  // (it computes, or is in the caller's code, or was preempted there).
  bool busy() const {
    return parks.load(std::memory_order_relaxed) != 0 &&
           (sleepers.load(std::memory_order_acquire) & kParked) == 0;
  }

  static constexpr uint32_t kParked = 0x80000000u;
};
static_assert(sizeof(Doorbell) == 16, "Doorbell lives in shared memory");

// Moves the cost of ring()'s store-load fence to sleepers (membarrier, where the kernel has
// it; `enable` false, from Tuning::asymmetricFence, keeps the fence). Called at communicator
// init; the first call of a process decides, since every process on the host that rings or
// sleeps on shared doorbells must agree.
void enableAsymmetricDoorbells(bool enable);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spin-then-yield phase of a polling loop; says when it is time to sleep instead. Where ranks
// share cores (`sharedCores`) a waiter yields at every poll (a peer that shares the core runs
// at once) for up to `yieldNs`, since a futex wake-up costs more than a turn of the run queue;
// with a core per rank it spins with `pause` for up to `spinNs` (Tuning).
class Backoff {
 public:
  Backoff(bool sharedCores, uint64_t spinNs, uint64_t yieldNs)
      : sharedCores_(sharedCores), spinNs_(spinNs), yieldNs_(yieldNs) {}
  // Call after a poll that made no progress; returns false once the spin budget is spent.
  bool spin();
  void reset() { spins_ = 0; }

 private:
  bool sharedCores_;
  uint64_t spinNs_;
  uint64_t yieldNs_;
  uint32_t spins_ = 0;
  uint64_t spinStartNs_ = 0;
};

}  // namespace weft
