// How long two ranks that share one core take to hand it to each other: the floor under every
// call when ranks outnumber cores (each rank must run once per call, so a core shared by two
// ranks switches at least twice a call). Measures one system call, a sched_yield with nobody
// to yield to, and a yield-driven turn-taking between two threads and between two processes.
//   yield_handoff [cpu [turns]]   (default: 0 100000)
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

namespace {

double usSince(std::chrono::steady_clock::time_point t0, long n) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(n);
}

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// Side `me` (0 or 1) takes its turn when the counter's parity says so, yielding otherwise.
void takeTurns(std::atomic<long>& turn, int me, long turns) {
  for (long i = 0; i < turns; ++i) {
    while (turn.load(std::memory_order_acquire) % 2 != me) sched_yield();
    turn.fetch_add(1, std::memory_order_acq_rel);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int cpu = argc > 1 ? std::atoi(argv[1]) : 0;
  const long turns = argc > 2 ? std::atol(argv[2]) : 100000;
  if (!pin(cpu)) {
    std::fprintf(stderr, "yield_handoff: cannot pin to cpu %d\n", cpu);
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < turns; ++i) syscall(SYS_getppid);
  std::printf("system call (getppid):             %8.3f us\n", usSince(t0, turns));
  t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < turns; ++i) sched_yield();
  std::printf("sched_yield, nobody to yield to:   %8.3f us\n", usSince(t0, turns));

  std::atomic<long> threadTurn{0};
  t0 = std::chrono::steady_clock::now();
  std::thread other([&] { takeTurns(threadTurn, 1, turns); });
  takeTurns(threadTurn, 0, turns);
  other.join();
  std::printf("two threads, one core, per turn:   %8.3f us\n", usSince(t0, 2 * turns));

  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    std::perror("yield_handoff: mmap");
    return 1;
  }
  auto* processTurn = new (page) std::atomic<long>(0);
  t0 = std::chrono::steady_clock::now();
  const pid_t child = fork();
  if (child < 0) {
    std::perror("yield_handoff: fork");
    return 1;
  }
  takeTurns(*processTurn, child == 0 ? 1 : 0, turns);
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  std::printf("two processes, one core, per turn: %8.3f us\n", usSince(t0, 2 * turns));
  return 0;
}
