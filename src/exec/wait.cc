// Where a rank waits: the run loop. It polls the tasks' interpreters; when a poll finds nothing
// it holds a shared core (core_hold.h), or spins and then yields (Backoff), and only then
// checks on the peers (poisoned or closed links at once, their health every 100 ms of stalling,
// the timeout) and sleeps on the rank's doorbell, which peers ring when they publish. A thread
// that drives several ranks has no one doorbell: it naps briefly instead.
#include <time.h>

#include "src/common/clock.h"
#include "src/common/doorbell.h"
#include "src/exec/core_hold.h"
#include "src/exec/executor.h"
#include "src/exec/task_set.h"

namespace weft::exec {
namespace {

constexpr uint64_t kHealthEveryNs = 100000000ull;  // peers' health, while stalled
constexpr uint64_t kSleepNs = 10000000ull;         // longest doorbell sleep: aborts are re-read

void napNs(uint64_t ns) {
  timespec ts{0, static_cast<long>(ns)};
  nanosleep(&ts, nullptr);
}

}  // namespace

struct RunScratch::States {
  std::vector<TaskState> tasks;
};
RunScratch::RunScratch() : states_(std::make_unique<States>()) {}
RunScratch::~RunScratch() = default;

RunResult run(std::vector<Task>& tasks, std::chrono::milliseconds timeout) {
  thread_local RunScratch scratch;
  return run(tasks, timeout, scratch);
}

RunResult run(std::vector<Task>& tasks, std::chrono::milliseconds timeout, RunScratch& scratch) {
  TaskSet set(tasks, scratch.states().tasks);
  if (!set.start()) return set.error();
  // One rank per thread sleeps on its own doorbell; a thread driving several ranks naps briefly.
  Doorbell* bell = tasks.size() == 1 ? tasks[0].bell : nullptr;
  const Tuning& tuning = tuningOr(tasks.empty() ? nullptr : tasks[0].tuning);
  CoreHold core(bell, bell ? tasks[0].cores : nullptr, tuning.holdNs);
  Backoff backoff(tuning.sharedCores, tuning.spinNs, tuning.yieldNs);
  // The clock is read only once spinning is over: a progressing run never reads it.
  uint64_t stalledSince = 0, lastHealth = 0;
  const uint64_t timeoutNs = static_cast<uint64_t>(timeout.count()) * 1000000ull;
  uint32_t naps = 0;

  while (set.active() > 0) {
    bool progress = set.poll();
    if (set.failed()) return set.error();
    if (progress) {
      core.progressed();
      backoff.reset();
      naps = 0;
      stalledSince = 0;
      continue;
    }
    if (core.hold(set) || backoff.spin()) continue;
    // Waiting for real: check on the peers, then nap or sleep.
    if (!set.checkPoison()) return set.error();
    const uint64_t now = nowNs();
    if (stalledSince == 0) stalledSince = lastHealth = now;
    if (now - lastHealth > kHealthEveryNs) {
      lastHealth = now;
      if (!set.checkHealth()) return set.error();
    }
    if (now - stalledSince > timeoutNs) return set.timedOut(timeout);
    if (!bell) {
      napNs(++naps > 64 ? 50000 : 5000);
      continue;
    }
    // Announce, poll once more, and sleep only if that found nothing (see Doorbell).
    uint32_t seen = bell->announce();
    progress = set.poll();
    if (!progress && !set.failed()) bell->sleep(seen, kSleepNs);
    bell->retire();
    if (set.failed()) return set.error();
    if (progress) {
      core.progressed();
      backoff.reset();
      stalledSince = 0;
    }
  }
  return {};
}

}  // namespace weft::exec
