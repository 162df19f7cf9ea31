// Waiting without burning a core: a doorbell is a 32-bit counter in (possibly shared) memory.
// Writers ring it after publishing; a waiter spins briefly with `pause`, yields, then sleeps on a
// futex, announcing itself first so writers only pay for a wake-up when someone sleeps.
#pragma once
#include <atomic>
#include <cstdint>

namespace weft {

struct Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};

  // Publish: bump the sequence and wake sleepers if any announced themselves.
  void ring();
  // Sleep until seq != seen or timeoutNs passes (spurious returns are allowed).
  void sleep(uint32_t seen, uint64_t timeoutNs);
};
static_assert(sizeof(Doorbell) == 8, "Doorbell lives in shared memory");

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spin-then-sleep back-off for a polling loop that watches one doorbell.
class Backoff {
 public:
  explicit Backoff(Doorbell* bell);
  // Call when a poll made no progress; `seen` is the doorbell value read before polling.
  void idle(uint32_t seen);
  void reset() { spins_ = 0; }

 private:
  Doorbell* bell_;
  uint32_t spins_ = 0;
  uint64_t spinStartNs_ = 0;
};

}  // namespace weft
