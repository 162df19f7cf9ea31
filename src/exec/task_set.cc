#include "src/exec/task_set.h"

#include <string>

namespace weft::exec {
namespace {

// Resets the per-task state of one thread's runs for `tasks` tasks.
std::vector<TaskState>& reusedStates(std::vector<TaskState>& states, size_t tasks) {
  if (states.size() < tasks) states.resize(tasks);
  for (size_t i = 0; i < tasks; ++i) {
    states[i].unit = 0;
    states[i].stall = {};
  }
  return states;
}

// A link whose peer ended it (a finished peer says goodbye so; a failed one too) fails this
// rank only where a lane waits on it in vain: a receiver the link holds nothing more for, or a
// sender without a free slot. A lane that began a step on it but waits on another link is fine.
bool waitsInVain(transport::Connection* c, bool receiving) {
  uint32_t bytes = 0, tag = 0;
  if (!receiving) return c->sendSlot() == nullptr;
  const bool none = c->recvSlot(&bytes, &tag) == nullptr;
  c->doneReading();  // only looked
  return none;
}

// "allreduce of 1024 float (ring)": what a Work runs, for messages.
std::string describe(const Work& w) {
  if (!w.plan) return "a call";
  const plan::Spec& spec = w.plan->spec;
  return std::string(plan::collectiveName(spec.coll)) + " of " + std::to_string(spec.count) + " " +
         dataTypeName(w.type) + " (" + w.plan->algorithm + ")";
}

// Why a poisoned or ended link fails the lane waiting on it. `cause`: the rank the peer named
// as the first to fail (-1: not carried); a peer that gave up because of another rank's
// failure names that rank, so that every survivor reports the rank that failed first.
std::string poisonedLinkText(transport::Connection* c, int peer, int cause, bool ended) {
  const std::string link = std::string(c->transportName()) + " link";
  const std::string who = "rank " + std::to_string(peer);
  if (cause >= 0 && cause != peer)
    return "rank " + std::to_string(cause) + " failed (reported by " + who + "): " + who +
           (ended ? " closed its " + link + " while this rank still waited on it"
                  : " abandoned the operation (" + link + ")");
  return ended ? who + " closed its " + link +
                     " while this rank still waited on it (it exited or gave up)"
               : who + " failed and abandoned the operation (" + link + ")";
}

}  // namespace

TaskSet::TaskSet(std::vector<Task>& tasks, std::vector<TaskState>& states)
    : tasks_(tasks), states_(reusedStates(states, tasks.size())) {}

TaskSet::~TaskSet() {
  for (size_t i = 0; i < tasks_.size(); ++i) states_[i].running = false;
}

bool TaskSet::startUnit(size_t i) {
  Task& t = tasks_[i];
  TaskState& ts = states_[i];
  while (ts.unit < t.units.size()) {
    ts.interpreter.start(t.units[ts.unit]);
    ts.running = true;
    if (!ts.interpreter.complete()) return true;
    finishWork(t.units[ts.unit]);
    ++ts.unit;
  }
  ts.running = false;
  return false;
}

bool TaskSet::start() {
  try {
    for (size_t i = 0; i < tasks_.size(); ++i)
      if (startUnit(i)) ++active_;
  } catch (const Error& e) {
    error_ = {e.code(), e.what(), 0};
    return false;
  }
  return true;
}

bool TaskSet::poll() {
  bool progress = false;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    TaskState& ts = states_[i];
    if (!ts.running) continue;
    Work& w = tasks_[i].units[ts.unit];
    if (w.abort && w.abort->load(std::memory_order_relaxed)) {
      error_ = {Status::kRemoteError, "operation aborted on rank " + std::to_string(w.rank),
                static_cast<int>(i)};
      return false;
    }
    ts.stall = {};
    try {
      if (ts.interpreter.poll(&error_.status, &error_.message, &ts.stall)) progress = true;
      if (error_.status != Status::kSuccess) {
        error_.failedTask = static_cast<int>(i);
        return false;
      }
      if (ts.interpreter.complete()) {
        finishWork(w);
        ++ts.unit;
        if (!startUnit(i)) --active_;
        progress = true;
      }
    } catch (const Error& e) {
      error_ = {e.code(), e.what(), static_cast<int>(i)};
      return false;
    }
  }
  return progress;
}

bool TaskSet::holdsCore() const {
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (states_[i].running && !states_[i].interpreter.holdsCore()) return false;
  return true;
}

bool TaskSet::checkPoison() {
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (!states_[i].running) continue;
    states_[i].interpreter.everyAwaitedLink(
        [&](transport::Connection* c, int peer, bool receiving) {
          const bool ended = c->peerEnded(), poisoned = c->poisoned();
          if (!ended && !poisoned) return true;
          // A peer that gave up fails every lane waiting on it (it may wait for the peer to
          // release a message by reference, which no slot shows). A peer that only ended (it
          // finished, or exited) fails a lane only where the link will never bring what it
          // waits for: what the peer posted before it ended still counts.
          if (!poisoned && !waitsInVain(c, receiving)) return true;
          const int cause = c->poisonCause();
          error_ = {Status::kRemoteError, poisonedLinkText(c, peer, cause, ended),
                    static_cast<int>(i), cause >= 0 ? cause : peer};
          return false;
        });
    if (failed()) return false;
  }
  return true;
}

bool TaskSet::checkHealth() {
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (!states_[i].running) continue;
    states_[i].interpreter.everyAwaitedLink(
        [&](transport::Connection* c, int peer, bool receiving) {
          if (c->peerEnded() && !waitsInVain(c, receiving)) return true;
          std::string why;
          const Status st = c->health(&why);
          if (st == Status::kSuccess) return true;
          const int cause = c->poisonCause();
          error_ = {st, why, static_cast<int>(i), cause >= 0 ? cause : peer};
          return false;
        });
    if (failed()) return false;
  }
  return true;
}

RunResult TaskSet::timedOut(std::chrono::milliseconds timeout) const {
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (!states_[i].running) continue;
    const Stall& s = states_[i].stall;
    const Work& w = tasks_[i].units[states_[i].unit];
    return {Status::kRemoteError,
            "rank " + std::to_string(w.rank) + " timed out after " +
                std::to_string(timeout.count()) + " ms without progress in " + describe(w) +
                ", waiting for rank " + std::to_string(s.peer) + " (lane " +
                std::to_string(s.lane) +
                "): a peer did not call the matching operation, or is stuck (WEFT_TIMEOUT_MS "
                "sets the limit)",
            static_cast<int>(i)};
  }
  return {};
}

}  // namespace weft::exec
