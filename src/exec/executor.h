// The host executor's entry points. It runs the Works of one or more ranks from one thread:
//   lower.h        what is derived from a Work once (transfer modes, store kinds, fast path)
//   interpreter.h  the state machine that moves a lowered Work's lanes, never blocking
//   fast_path.cc   runStraight: a small repeated call moved straight through its links
//   wait.h         the run loop: polls, spins, yields, sleeps, holds shared cores, checks
//                  peers' health and the timeout
#pragma once
#include <chrono>
#include <memory>
#include <vector>

#include "src/exec/work.h"

namespace weft::exec {

// What runs keep from one to the next (per-task interpreters and lane state), so that a warm run
// allocates nothing. One per thread: run() without it uses a thread-local one; a caller that
// already holds per-thread state passes its own and saves the thread-local lookup on every call.
class RunScratch {
 public:
  RunScratch();
  ~RunScratch();
  RunScratch(const RunScratch&) = delete;
  RunScratch& operator=(const RunScratch&) = delete;
  struct States;
  States& states() { return *states_; }

 private:
  std::unique_ptr<States> states_;
};

// Runs `w` on the interpreter's fast path, for repeated small calls (the caller knows the Work
// is unchanged but for its tag, `tag`), when lowerStraight() finds its program a few steps with
// no dependency on a later lane: local copies and reductions and one send or one receive (plain
// or reducing), or both as an exchange whose send is a lane of its own, all small.
//   kNotRun:  nothing was done (a slot not free, a message not there after a brief wait, or
//             another shape): run() the Work as usual.
//   kDone:    the call is complete.
//   kSent:    an exchange's send went out but its message has not come: the Work's laneTags
//             are `tag` and its lanesDone names the send's lane; run() it, then clear lanesDone.
// May throw where connection() does (before anything is done).
enum class Straight { kNotRun, kDone, kSent };
Straight runStraight(Work& w, uint32_t tag);

// Runs all tasks to completion, interleaving them; returns the first error (other tasks are then
// abandoned). `timeout` bounds any stretch without progress.
RunResult run(std::vector<Task>& tasks, std::chrono::milliseconds timeout);
RunResult run(std::vector<Task>& tasks, std::chrono::milliseconds timeout, RunScratch& scratch);

// Slices this process's runs have stored straight into a receiver's landing so far.
uint64_t landedSlices();

}  // namespace weft::exec
