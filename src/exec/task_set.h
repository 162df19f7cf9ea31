// The Tasks one run() drives: each task's interpreter, started on its Works in order, polled in
// turn, and, once the run waits, asked which links it waits on so that a dead or failed peer
// and a timeout become errors that name the peer.
#pragma once
#include <chrono>
#include <vector>

#include "src/exec/interpreter.h"

namespace weft::exec {

struct TaskState {
  size_t unit = 0;
  Interpreter interpreter;  // kept from run to run, with its buffers
  bool running = false;
  Stall stall;
};

class TaskSet {
 public:
  // `states` are reused from run to run, so a warm run allocates nothing.
  TaskSet(std::vector<Task>& tasks, std::vector<TaskState>& states);
  ~TaskSet();

  // Starts the first unit of every task; false (and error()) on failure.
  bool start();
  size_t active() const { return active_; }
  RunResult& error() { return error_; }
  bool failed() const { return error_.status != Status::kSuccess; }

  // Polls every running task once; true on progress. On failure sets error().
  bool poll();

  // Whether every running task's Work may keep a shared core while it waits.
  bool holdsCore() const;

  // Calls f(peer) for every rank a running task's lanes wait on, until f returns false.
  template <class F>
  void everyAwaitedPeer(F&& f) const {
    for (size_t i = 0; i < tasks_.size(); ++i)
      if (states_[i].running &&
          !states_[i].interpreter.everyAwaitedLink(
              [&](transport::Connection*, int peer, bool) { return f(peer); }))
        return;
  }

  // A peer that poisoned or closed a link a lane waits on in vain: false and error().
  bool checkPoison();
  // Asks every awaited link's transport whether its peer lives (slow: a system call or a
  // liveness probe); false and error() where one does not.
  bool checkHealth();
  // The error for a run that made no progress for `timeout`, naming what it waited on.
  RunResult timedOut(std::chrono::milliseconds timeout) const;

 private:
  bool startUnit(size_t i);

  std::vector<Task>& tasks_;
  std::vector<TaskState>& states_;
  size_t active_ = 0;
  RunResult error_;
};

}  // namespace weft::exec
