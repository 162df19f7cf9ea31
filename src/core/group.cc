#include "src/core/group.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "src/common/log.h"
#include "src/core/communicator.h"
#include "src/core/device_path.h"
#include "src/exec/host_stream.h"

namespace weft::core {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<Call> calls;
  std::vector<std::function<Status(std::string*)>> jobs;
};

// What a blocking collective outside a group reuses from the thread's previous one.
struct Reused {
  std::vector<exec::Task> tasks = std::vector<exec::Task>(1);
  std::vector<Communicator*> comms = std::vector<Communicator*>(1);
  Call last;            // the call the Work was filled for, while it may be refilled
  uint64_t serial = 0;  // and its communicator's serial (addresses are reused)
  bool refillable = false;
};

// All of a thread's call state in one thread-local, looked up once per call (each lookup of a
// thread-local in a shared library is a call into the dynamic linker). Not inlined: callers
// then pass the reference on, where the compiler would otherwise look it up again in each
// callee it specialises for the one thread-local.
struct ThreadCalls {
  GroupState group;
  Reused reused;
  exec::RunScratch scratch;
};
thread_local ThreadCalls* tCalls = nullptr;  // trivial: one lookup and no init guard per call

[[gnu::noinline]] ThreadCalls& firstThreadCalls() {
  struct Owner {
    std::unique_ptr<ThreadCalls> calls = std::make_unique<ThreadCalls>();
    ~Owner() { tCalls = nullptr; }  // a later call on this exiting thread starts afresh
  };
  thread_local Owner owner;
  tCalls = owner.calls.get();
  return *tCalls;
}

[[gnu::noinline]] ThreadCalls& threadCalls() {
  ThreadCalls* calls = tCalls;
  return calls ? *calls : firstThreadCalls();
}

Status runJobs(std::vector<std::function<Status(std::string*)>>& jobs, std::string* why) {
  if (jobs.size() == 1) return jobs[0](why);
  std::vector<Status> st(jobs.size(), Status::kSuccess);
  std::vector<std::string> msg(jobs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        st[i] = jobs[i](&msg[i]);
      } catch (const Error& e) {
        st[i] = e.code();
        msg[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < jobs.size(); ++i)
    if (st[i] != Status::kSuccess) {
      *why = msg[i];
      return st[i];
    }
  return Status::kSuccess;
}

// The units of one communicator, in call order; p2p calls of the group form one unit.
exec::Task buildTask(Communicator* comm, const std::vector<Call>& calls) {
  exec::Task task;
  task.bell = comm->bell();
  task.cores = comm->coreSharing();
  task.tuning = &comm->tuning();
  std::vector<Call> p2p;
  int p2pSlot = -1;
  for (const Call& c : calls) {
    if (c.coll == plan::Collective::kSendRecv) {
      if (p2pSlot < 0) {
        p2pSlot = static_cast<int>(task.units.size());
        task.units.emplace_back();
      }
      p2p.push_back(c);
    } else {
      task.units.push_back(comm->collectiveWork(c));
    }
  }
  if (p2pSlot >= 0) task.units[p2pSlot] = comm->p2pWork(p2p);
  return task;
}

// Links are opened on first use, so a peer may wait on one this rank never opened: it failed
// first. Opening every link its failed calls name lets recordError's poison reach that peer at
// once (in a tree, a mismatch seen near the root) instead of at its timeout.
void openLinksOfFailedCalls(const exec::Task& task, Communicator* comm) {
  try {
    for (const exec::Work& w : task.units) {
      if (!w.program) continue;
      for (const plan::Lane& lane : w.program->lanes)
        for (const plan::Step& s : lane.steps) {
          if (plan::opSends(s.op)) comm->connection(s.sendPeer, plan::sendChannelOf(lane));
          if (plan::opRecvs(s.op)) comm->connection(s.recvPeer, lane.channel);
        }
    }
  } catch (const Error& e) {
    WEFT_WARN(INIT, "rank %d: could not open a link to tell a peer of the failure: %s",
              comm->rank(), e.what());
  }
}

// Marks a run of these communicators' work in progress for its lifetime: Abort or Destroy from
// another thread waits for it to leave (Communicator::enterRun) before freeing what it uses.
class Running {
 public:
  explicit Running(const std::vector<Communicator*>& comms) : comms_(comms) {
    for (Communicator* comm : comms_) comm->enterRun();
  }
  ~Running() {
    for (Communicator* comm : comms_) comm->leaveRun();
  }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;

 private:
  const std::vector<Communicator*>& comms_;
};

// `scratch`: the calling thread's, or null on a stream's thread (exec::run has its own).
Status runTasks(std::vector<exec::Task>& tasks, std::vector<Communicator*>& comms, std::string* why,
                exec::RunScratch* scratch = nullptr) {
  const Running running(comms);
  auto timeout = comms.front()->tuning().timeout;
  for (auto* c : comms) timeout = std::max(timeout, c->tuning().timeout);
  exec::RunResult r = scratch ? exec::run(tasks, timeout, *scratch) : exec::run(tasks, timeout);
  if (r.status == Status::kSuccess) return r.status;
  if (r.failedTask >= 0) {
    openLinksOfFailedCalls(tasks[r.failedTask], comms[r.failedTask]);
    comms[r.failedTask]->recordError(r.status, r.message, r.causeRank);
    // The caller may free its buffers once this returns: peers reading them in place must
    // have stopped (recordError's poison keeps them from starting again).
    comms[r.failedTask]->awaitPeersOutOfMemory(timeout);
  }
  *why = r.message;
  return r.status;
}

bool sameCall(const Call& a, const Call& b) {
  return a.comm == b.comm && a.coll == b.coll && a.send == b.send && a.recv == b.recv &&
         a.count == b.count && a.type == b.type && a.op == b.op && a.root == b.root &&
         a.isSend == b.isSend && a.stream == b.stream;
}

// A blocking collective outside a group, the latency-critical case: its Task lives in storage
// this thread reuses, so a call allocates nothing once the shapes repeat.
Status runBlockingCollective(const Call& call, std::string* why, ThreadCalls& thread) {
  Reused& r = thread.reused;
  exec::Task& task = r.tasks.front();
  task.bell = call.comm->bell();
  task.cores = call.comm->coreSharing();
  task.tuning = &call.comm->tuning();
  task.units.resize(1);
  r.comms.front() = call.comm;
  exec::Work& w = task.units.front();
  // A loop of identical calls (the common case in training and benchmarks) skips the plan
  // lookup and the Work's setup.
  const bool same = r.refillable && sameCall(r.last, call) && r.serial == call.comm->serial();
  r.refillable = false;
  try {
    if (!same || !call.comm->refillCollectiveWork(call, &w))
      call.comm->fillCollectiveWork(call, &w);
  } catch (const Error& e) {
    *why = e.what();
    return e.code();
  }
  const bool pooled = w.keep != nullptr;
  const Running running(r.comms);  // to the end: the scratch goes back to the communicator's pool
  Status st = runTasks(r.tasks, r.comms, why, &thread.scratch);
  w.keep.reset();  // scratch back to its pool now
  r.last = call;
  r.serial = call.comm->serial();
  r.refillable = st == Status::kSuccess && !pooled;
  return st;
}

}  // namespace

bool repeatStraight(const Call& call, Status* st) {
  ThreadCalls& thread = threadCalls();
  Reused& r = thread.reused;
  if (thread.group.depth != 0 || !r.refillable || !sameCall(r.last, call) ||
      r.serial != call.comm->serial() || call.comm->asyncError() != Status::kSuccess)
    return false;
  exec::Work& w = r.tasks.front().units.front();
  if (w.keep || (w.abort && w.abort->load(std::memory_order_relaxed))) return false;
  exec::Straight done;
  try {
    done = exec::runStraight(w, call.comm->peekCollectiveTag(call, w));
  } catch (const Error&) {
    return false;  // nothing was done: the ordinary path meets it again and reports it
  }
  if (done == exec::Straight::kNotRun) return false;
  call.comm->commitStraightCall();
  *st = Status::kSuccess;
  if (done == exec::Straight::kDone) return true;
  // Our message went out and the peer's has not come: the executor waits for it (a failure
  // there is recorded on the communicator, as on the ordinary path).
  std::string why;
  try {
    *st = runTasks(r.tasks, r.comms, &why, &thread.scratch);
  } catch (const std::exception& e) {
    const Error* error = dynamic_cast<const Error*>(&e);
    *st = error ? error->code() : Status::kInternalError;
    call.comm->recordError(*st, e.what());
  }
  w.lanesDone = 0;
  r.refillable = *st == Status::kSuccess;
  return true;
}

namespace {

Status launch(std::vector<Call>& calls, std::string* why, ThreadCalls& thread);

// The staged host side of calls on device memory, run on their stream's worker thread.
Status runStagedCalls(std::vector<Call>& calls, std::string* why) {
  return launch(calls, why, threadCalls());
}

// Which of a staged call's buffers its rank reads and writes.
BufferUse stagedBufferUse(const Call& call) {
  return bufferUse(call, call.comm->rank(), call.comm->size());
}

// Calls on device memory, on any CUDA streams: queued there by the device path.
Status launchDevice(const std::vector<Call>& calls, std::string* why) {
  return launchDeviceCalls(calls, runStagedCalls, stagedBufferUse, why);
}

// One call outside a group: the common case, without the grouping maps.
Status launchOne(const Call& call, std::string* why, ThreadCalls& thread) {
  if (call.device) return launchDevice({call}, why);
  if (!call.stream && call.coll != plan::Collective::kSendRecv)
    return runBlockingCollective(call, why, thread);
  std::vector<exec::Task> tasks;
  std::vector<Communicator*> comms{call.comm};
  try {
    tasks.push_back(buildTask(call.comm, {call}));
  } catch (const Error& e) {
    *why = e.what();
    return e.code();
  }
  void* stream = call.stream;
  if (!stream) return runTasks(tasks, comms, why, &thread.scratch);
  auto shared = std::make_shared<std::pair<std::vector<exec::Task>, std::vector<Communicator*>>>(
      std::move(tasks), std::move(comms));
  return static_cast<exec::HostStream*>(stream)->enqueue(
      [shared](std::string* msg) { return runTasks(shared->first, shared->second, msg); }, why,
      call.comm->tuning());
}

Status launch(std::vector<Call>& calls, std::string* why, ThreadCalls& thread) {
  if (calls.size() == 1) return launchOne(calls.front(), why, thread);
  // Calls on device memory go to their streams; the rest run here.
  if (std::any_of(calls.begin(), calls.end(), [](const Call& c) { return c.device; })) {
    std::vector<Call> host, device;
    for (const Call& c : calls) (c.device ? device : host).push_back(c);
    Status first = launchDevice(device, why);
    if (host.empty()) return first;
    std::string msg;
    const Status st = launch(host, &msg, thread);
    if (st != Status::kSuccess && first == Status::kSuccess) {
      first = st;
      *why = msg;
    }
    return first;
  }
  // Group by communicator, keeping first-appearance order, then by stream.
  std::vector<Communicator*> order;
  std::map<Communicator*, std::vector<Call>> byComm;
  for (const Call& c : calls) {
    if (!byComm.count(c.comm)) order.push_back(c.comm);
    byComm[c.comm].push_back(c);
  }
  std::map<void*, std::pair<std::vector<exec::Task>, std::vector<Communicator*>>> byStream;
  std::vector<void*> streamOrder;
  for (Communicator* comm : order) {
    void* stream = byComm[comm].front().stream;
    if (!byStream.count(stream)) streamOrder.push_back(stream);
    auto& entry = byStream[stream];
    try {
      entry.first.push_back(buildTask(comm, byComm[comm]));
    } catch (const Error& e) {
      *why = e.what();
      return e.code();
    }
    entry.second.push_back(comm);
  }
  Status first = Status::kSuccess;
  for (void* stream : streamOrder) {
    auto& [tasks, comms] = byStream[stream];
    if (!stream) {
      std::string msg;
      Status st = runTasks(tasks, comms, &msg, &thread.scratch);
      if (st != Status::kSuccess && first == Status::kSuccess) {
        first = st;
        *why = msg;
      }
    } else {
      auto shared =
          std::make_shared<std::pair<std::vector<exec::Task>, std::vector<Communicator*>>>(
              std::move(tasks), std::move(comms));
      std::string msg;
      const Status st = static_cast<exec::HostStream*>(stream)->enqueue(
          [shared](std::string* m) { return runTasks(shared->first, shared->second, m); }, &msg,
          shared->second.front()->tuning());
      if (st != Status::kSuccess && first == Status::kSuccess) {
        first = st;
        *why = msg;
      }
    }
  }
  return first;
}

// Leaves one group level for `api` (its name, for the error). When that closes the outermost
// group, runs the deferred jobs and hands the group's calls out in `*calls`; an inner level leaves
// `*calls` empty (std::nullopt).
Status closeGroup(const char* api, ThreadCalls& thread, std::optional<std::vector<Call>>* calls,
                  std::string* why) {
  if (thread.group.depth == 0) {
    *why = std::string(api) + " called without a matching ncclGroupStart";
    return Status::kInvalidUsage;
  }
  if (--thread.group.depth > 0) return Status::kSuccess;
  auto jobs = std::move(thread.group.jobs);
  *calls = std::move(thread.group.calls);
  thread.group.jobs.clear();
  thread.group.calls.clear();
  if (jobs.empty()) return Status::kSuccess;
  return runJobs(jobs, why);
}

}  // namespace

void groupStart() { ++threadCalls().group.depth; }
int groupDepth() { return threadCalls().group.depth; }

Status groupEnd(std::string* why) {
  ThreadCalls& thread = threadCalls();
  std::optional<std::vector<Call>> calls;
  Status st = closeGroup("ncclGroupEnd", thread, &calls, why);
  if (st != Status::kSuccess || !calls || calls->empty()) return st;
  return launch(*calls, why, thread);
}

Status groupSimulateEnd(double* estimatedUs, std::string* why) {
  *estimatedUs = 0;
  std::optional<std::vector<Call>> calls;
  Status st = closeGroup("ncclGroupSimulateEnd", threadCalls(), &calls, why);
  if (st != Status::kSuccess || !calls) return st;
  std::map<Communicator*, double> perComm;
  try {
    for (const Call& c : *calls) perComm[c.comm] += c.comm->estimateUs(c);
  } catch (const Error& e) {
    *why = e.what();
    return e.code();
  }
  for (const auto& [comm, us] : perComm) *estimatedUs = std::max(*estimatedUs, us);
  return Status::kSuccess;
}

Status submit(const Call& call, std::string* why) {
  if (call.comm->revoked()) {
    // As NCCL: a revoked communicator is kept for destroy, split and shrink only.
    *why = "communicator was revoked (ncclCommRevoke): only destroy, split and shrink remain";
    return Status::kInvalidUsage;
  }
  ThreadCalls& thread = threadCalls();
  if (thread.group.depth > 0) {
    thread.group.calls.push_back(call);
    return Status::kSuccess;
  }
  return launchOne(call, why, thread);
}

Status deferOrRun(std::function<Status(std::string*)> job, std::string* why) {
  ThreadCalls& thread = threadCalls();
  if (thread.group.depth > 0) {
    thread.group.jobs.push_back(std::move(job));
    return Status::kSuccess;
  }
  try {
    return job(why);
  } catch (const Error& e) {
    *why = e.what();
    return e.code();
  }
}

}  // namespace weft::core
