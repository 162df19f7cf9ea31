#include "src/common/futex.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "src/common/env.h"

namespace weft {

static long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  // Not FUTEX_PRIVATE: doorbells are shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

void Doorbell::ring() {
  seq.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) != 0) futex(&seq, FUTEX_WAKE, INT32_MAX, nullptr);
}

void Doorbell::sleep(uint32_t seen, uint64_t timeoutNs) {
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (seq.load(std::memory_order_seq_cst) == seen) {
    timespec ts{static_cast<time_t>(timeoutNs / 1000000000ull),
                static_cast<long>(timeoutNs % 1000000000ull)};
    futex(&seq, FUTEX_WAIT, seen, &ts);
  }
  sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

static uint64_t spinBudgetNs() {
  static const uint64_t ns = static_cast<uint64_t>(env::getInt("WEFT_SPIN_US")) * 1000;
  return ns;
}

Backoff::Backoff(Doorbell* bell) : bell_(bell) {}

void Backoff::idle(uint32_t seen) {
  if (spins_ == 0) spinStartNs_ = nowNs();
  ++spins_;
  if ((spins_ & 63) != 0) {
    for (int i = 0; i < 8; ++i) cpuRelax();
    return;
  }
  uint64_t spent = nowNs() - spinStartNs_;
  if (spent < spinBudgetNs()) {
    sched_yield();
    return;
  }
  // Sleep in short naps so abort flags and peer liveness are re-checked regularly.
  bell_->sleep(seen, 10 * 1000 * 1000);
}

}  // namespace weft
