// One cache line handed back and forth between two threads pinned to two cores: the floor under
// any collective whose ranks wait on each other every call. Header-only, so that the peer
// benchmarks of perf/compare (built outside CMake) measure it the same way as line_pingpong.
//
// On a virtual machine the round trip is also a reading of the moment: where the hypervisor has
// put the two virtual CPUs (one cache or two) changes it several-fold, for seconds at a time.
// perf/compare tags every measurement with it so that runs made in different spells are not
// compared with each other.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace probe {

struct RoundTrip {
  double ns = 0;        // per round trip
  bool pinned = false;  // both threads ran where they were asked to
};

namespace detail {

struct alignas(64) Flag {
  std::atomic<long> value{0};
};

inline bool pinSelf(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

inline void put(Flag& flag, long v, bool nonTemporal) {
#if defined(__x86_64__)
  if (nonTemporal) {
    _mm_stream_si64(reinterpret_cast<long long*>(&flag.value), v);
    _mm_sfence();
    return;
  }
#endif
  (void)nonTemporal;
  flag.value.store(v, std::memory_order_release);
}

inline void relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace detail

// `trips` round trips between two new threads pinned to cpuA and cpuB (the caller's own affinity
// is left alone). nonTemporal: each side stores its flag with a non-temporal store and a fence.
inline RoundTrip lineRoundTrip(int cpuA, int cpuB, long trips, bool nonTemporal = false) {
  auto ping = std::make_unique<detail::Flag>();
  auto pong = std::make_unique<detail::Flag>();
  std::atomic<bool> pinnedA{true}, pinnedB{true};
  std::atomic<int> ready{0};
  std::thread answer([&] {
    pinnedB = detail::pinSelf(cpuB);
    ready.fetch_add(1);
    for (long i = 1; i <= trips; ++i) {
      while (ping->value.load(std::memory_order_acquire) != i) detail::relax();
      detail::put(*pong, i, nonTemporal);
    }
  });
  RoundTrip out;
  std::thread ask([&] {
    pinnedA = detail::pinSelf(cpuA);
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();  // both pinned before the clock starts
    const auto start = std::chrono::steady_clock::now();
    for (long i = 1; i <= trips; ++i) {
      detail::put(*ping, i, nonTemporal);
      while (pong->value.load(std::memory_order_acquire) != i) detail::relax();
    }
    const auto end = std::chrono::steady_clock::now();
    out.ns = std::chrono::duration<double, std::nano>(end - start).count() / double(trips);
  });
  ask.join();
  answer.join();
  out.pinned = pinnedA && pinnedB;
  return out;
}

// The first two CPUs this process may run on; false when it may run on fewer than two.
inline bool firstTwoCpus(int& a, int& b) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    (found == 0 ? a : b) = cpu;
    ++found;
  }
  return found == 2;
}

}  // namespace probe
