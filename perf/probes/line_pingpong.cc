// Round trip of one cache line between two cores: the floor under any collective whose ranks
// wait on each other every call (a 2-rank allreduce needs at least half of it per call).
//   line_pingpong [cpuA cpuB [round trips]]   (default: 0 1 2000000)
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

alignas(64) std::atomic<long> gPing{0};
alignas(64) std::atomic<long> gPong{0};

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
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
  if (trips <= 0) {
    std::fprintf(stderr, "usage: line_pingpong [cpuA cpuB [round trips > 0]]\n");
    return 2;
  }
  bool pinned = true;
  std::thread peer([&] {
    if (!pin(cpuB)) pinned = false;
    for (long i = 1; i <= trips; ++i) {
      while (gPing.load(std::memory_order_acquire) != i) relax();
      gPong.store(i, std::memory_order_release);
    }
  });
  if (!pin(cpuA)) pinned = false;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 1; i <= trips; ++i) {
    gPing.store(i, std::memory_order_release);
    while (gPong.load(std::memory_order_acquire) != i) relax();
  }
  const auto end = std::chrono::steady_clock::now();
  peer.join();
  const double ns = std::chrono::duration<double, std::nano>(end - start).count() / trips;
  std::printf("cpus %d and %d%s: round trip %.1f ns, one way %.1f ns (%ld trips)\n", cpuA, cpuB,
              pinned ? "" : " (not pinned)", ns, ns / 2, trips);
  return 0;
}
