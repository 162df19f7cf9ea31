// Monotonic time and deadlines for bounded waits.
#pragma once
#include <chrono>
#include <cstdint>

namespace weft {

using Clock = std::chrono::steady_clock;

inline uint64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds timeout) : end_(Clock::now() + timeout) {}
  bool expired() const { return Clock::now() >= end_; }
  std::chrono::milliseconds remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now());
    return left.count() > 0 ? left : std::chrono::milliseconds(0);
  }

 private:
  Clock::time_point end_;
};

}  // namespace weft
