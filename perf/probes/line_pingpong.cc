// Round trip of one cache line between two cores: the floor under any collective whose ranks
// wait on each other every call (a 2-rank allreduce needs at least half of it per call).
//   line_pingpong [cpuA cpuB [round trips [nt]]]   (default: 0 1 2000000; nt: each side
//   stores its flag with a non-temporal store and a fence instead of a release store)
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

alignas(64) std::atomic<long> gPing{0};
alignas(64) std::atomic<long> gPong{0};

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

bool gNonTemporal = false;

void put(std::atomic<long>& flag, long v) {
#if defined(__x86_64__)
  if (gNonTemporal) {
    _mm_stream_si64(reinterpret_cast<long long*>(&flag), v);
    _mm_sfence();
    return;
  }
#endif
  flag.store(v, std::memory_order_release);
}

void relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const int cpuA = argc > 2 ? std::atoi(argv[1]) : 0;
  const int cpuB = argc > 2 ? std::atoi(argv[2]) : 1;
  const long trips = argc > 3 ? std::atol(argv[3]) : 2000000;
  gNonTemporal = argc > 4 && std::strcmp(argv[4], "nt") == 0;
  if (trips <= 0) {
    std::fprintf(stderr, "usage: line_pingpong [cpuA cpuB [round trips > 0 [nt]]]\n");
    return 2;
  }
  bool pinned = true;
  std::thread peer([&] {
    if (!pin(cpuB)) pinned = false;
    for (long i = 1; i <= trips; ++i) {
      while (gPing.load(std::memory_order_acquire) != i) relax();
      put(gPong, i);
    }
  });
  if (!pin(cpuA)) pinned = false;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 1; i <= trips; ++i) {
    put(gPing, i);
    while (gPong.load(std::memory_order_acquire) != i) relax();
  }
  const auto end = std::chrono::steady_clock::now();
  peer.join();
  const double ns = std::chrono::duration<double, std::nano>(end - start).count() / trips;
  std::printf("cpus %d and %d%s%s: round trip %.1f ns, one way %.1f ns (%ld trips)\n", cpuA,
              cpuB, pinned ? "" : " (not pinned)", gNonTemporal ? ", non-temporal flags" : "", ns,
              ns / 2, trips);
  return 0;
}
