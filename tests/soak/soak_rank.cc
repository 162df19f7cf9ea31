// Drawing jobs, running one rank's calls with its fault, and judging a job's outcome.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "tests/soak/soak_job.h"
#include "tests/soak/soak_random.h"

namespace soak {

const char* modeName(Mode m) { return m == Mode::kThreads ? "threads" : "processes"; }
const char* transportName(Transport t) {
  return t == Transport::kLocal ? "local" : t == Transport::kShm ? "shm" : "tcp";
}
const char* faultName(Fault f) {
  return f == Fault::kNone ? "none" : f == Fault::kKill ? "kill" : "abort";
}

std::string JobSpec::describe() const {
  char text[320];
  std::snprintf(text, sizeof(text),
                "job %lld (seed %llu): %d ranks as %s%s, %s, NCCL_ALGO=%s, %d calls, fault %s",
                static_cast<long long>(index), static_cast<unsigned long long>(seed), nranks,
                modeName(mode),
                mode == Mode::kThreads ? (initAll ? " (InitAll)" : " (InitRank)") : "",
                transportName(transport), algo[0] ? algo : "(unset)", calls, faultName(fault));
  std::string s = text;
  if (fault != Fault::kNone) {
    std::snprintf(text, sizeof(text), " on rank %d at %s %d after %d us", victim,
                  faultCall < 0 ? "init" : "call", faultCall, faultDelayUs);
    s += text;
  }
  return s;
}

JobSpec drawJob(uint64_t runSeed, int64_t index, const JobOptions& o) {
  // Every draw happens whatever the options, so that a job's other choices do not depend on them.
  Rng rng(mix(runSeed, 0x6a6f62ull + static_cast<uint64_t>(index)));
  JobSpec j;
  j.seed = rng.next();
  j.index = index;
  j.limits = o.limits;
  const uint64_t ranks = rng.next(), transport = rng.next(), algo = rng.next();
  const bool threads = rng.chance(0.6), initAll = rng.chance(0.3), fault = rng.chance(o.faultRate);
  const bool kill = rng.chance(0.6), duringInit = rng.chance(0.15), quick = rng.chance(0.7);
  const uint64_t calls = rng.logUniform(1, std::max(1, o.maxCallsPerJob));
  const uint64_t victim = rng.next(), faultCall = rng.next(), delay = rng.next();
  j.nranks = 2 + static_cast<int>(ranks % std::max(1, std::min(o.maxRanks, kMaxRanks) - 1));
  j.mode = o.threads && (!o.processes || threads) ? Mode::kThreads : Mode::kProcesses;
  std::vector<Transport> transports;
  if (o.local && j.mode == Mode::kThreads) transports.push_back(Transport::kLocal);
  if (o.shm) transports.push_back(Transport::kShm);
  if (o.tcp) transports.push_back(Transport::kTcp);
  if (transports.empty()) transports.push_back(Transport::kShm);
  j.transport = transports[transport % transports.size()];
  std::snprintf(j.algo, sizeof(j.algo), "%s", o.algos[algo % o.algos.size()].c_str());
  j.initAll = j.mode == Mode::kThreads && initAll;
  j.calls = static_cast<int>(calls);
  if (fault) {
    j.fault = j.mode == Mode::kProcesses && kill ? Fault::kKill : Fault::kAbort;
    j.calls = std::max(j.calls, 2);  // the fault strikes before the last call, which needs everyone
    j.victim = static_cast<int>(victim % j.nranks);
    j.faultCall =
        j.fault == Fault::kKill && duringInit ? -1 : static_cast<int>(faultCall % (j.calls - 1));
    // Mostly within a small call's time, sometimes well into a large one or into init.
    j.faultDelayUs = static_cast<int>(quick ? delay % 2000 : delay % 100000);
  }
  return j;
}

static void bump(RankOutcome* out) { out->progress.fetch_add(1, std::memory_order_relaxed); }

static void copyText(char* dst, size_t size, const std::string& text) {
  std::snprintf(dst, size, "%s", text.c_str());
}

// Waits for the SIGKILL a fault thread of this process sends. Bounded: should it never come,
// the rank goes on and the job's judge reports a victim that did not die.
static void awaitOwnDeath(RankOutcome* out) {
  for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  copyText(out->errorText, sizeof(out->errorText), "the fault's SIGKILL never came");
}

void runRank(const JobSpec& job, int rank, const ncclUniqueId* id, std::atomic<ncclComm_t>* slot,
             RankOutcome* out) {
  const bool victim = job.fault != Fault::kNone && rank == job.victim;
  const auto delay = std::chrono::microseconds(job.faultDelayUs);
  std::thread faultThread;
  auto killLater = [delay] {
    std::this_thread::sleep_for(delay);
    kill(getpid(), SIGKILL);
  };
  out->phase = 1;
  bump(out);
  if (id) {
    if (victim && job.fault == Fault::kKill && job.faultCall < 0)
      faultThread = std::thread(killLater);
    ncclComm_t comm = nullptr;
    const auto start = std::chrono::steady_clock::now();
    out->initRc = ncclCommInitRank(&comm, job.nranks, *id, rank);
    out->errorCallMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (out->initRc == ncclSuccess) slot->store(comm);
    if (victim && job.fault == Fault::kKill && job.faultCall < 0) awaitOwnDeath(out);
  } else {
    out->initRc = slot->load() ? ncclSuccess : ncclInternalError;
  }
  bump(out);
  ncclComm_t comm = slot->load();  // the handle stays readable after an abort (a tombstone)
  if (out->initRc != ncclSuccess || !comm) {
    out->errorCall = -1;
    out->errorRc = out->initRc;
    out->teardownRc = ncclSuccess;  // a failed ncclCommInitRank leaves no communicator
    copyText(out->errorText, sizeof(out->errorText), ncclGetLastError(nullptr));
    out->phase = 4;
    bump(out);
    if (faultThread.joinable()) faultThread.join();
    return;
  }
  out->phase = 2;
  for (int i = 0; i < job.calls; ++i) {
    out->currentCall = i;
    const Call call = drawCall(job.seed, i, job.calls, job.nranks, job.limits);
    CallRun run(call, rank, job.nranks);
    const bool strikeNow = victim && i == job.faultCall;
    if (strikeNow && job.fault == Fault::kKill) faultThread = std::thread(killLater);
    if (strikeNow && job.fault == Fault::kAbort)
      faultThread = std::thread([delay, slot, out] {
        std::this_thread::sleep_for(delay);
        if (ncclComm_t mine = slot->exchange(nullptr)) out->abortRc = ncclCommAbort(mine);
      });
    const auto start = std::chrono::steady_clock::now();
    const ncclResult_t rc = run.issue(comm);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    bump(out);
    if (rc != ncclSuccess) {
      out->errorCall = i;
      out->errorRc = rc;
      out->errorCallMs = ms;
      copyText(out->errorText, sizeof(out->errorText),
               call.describe() + ": " + ncclGetErrorString(rc) + ": " + ncclGetLastError(comm));
      break;
    }
    std::string why = run.check();
    if (!why.empty() && out->wrong++ == 0) {
      char where[48];
      std::snprintf(where, sizeof(where), "call %d: ", i);
      copyText(out->wrongText, sizeof(out->wrongText), where + why);
    }
    ++out->callsOk;
    bump(out);
    if (strikeNow && job.fault == Fault::kKill) awaitOwnDeath(out);
    if (faultThread.joinable()) faultThread.join();  // the abort is done before the next call
  }
  if (faultThread.joinable()) faultThread.join();
  out->phase = 3;
  bump(out);
  if (ncclComm_t mine = slot->exchange(nullptr))
    out->teardownRc = out->errorCall == -2 ? ncclCommDestroy(mine) : ncclCommAbort(mine);
  else
    out->teardownRc = ncclSuccess;  // a fault's aborter or the watchdog ended it
  out->phase = 4;
  bump(out);
}

void judge(const JobSpec& job, const RankOutcome* outcomes, const std::vector<int>& exitStatus,
           JobResult* result) {
  char text[600];
  auto problem = [&](int rank, const char* what, const char* detail) {
    std::snprintf(text, sizeof(text), "rank %d: %s%s%s", rank, what, detail && *detail ? ": " : "",
                  detail ? detail : "");
    result->problems.push_back(text);
  };
  bool allSurvivorsFailed = true;
  for (int r = 0; r < job.nranks; ++r) {
    const RankOutcome& o = outcomes[r];
    const bool victim = job.fault != Fault::kNone && r == job.victim;
    const bool killed = victim && job.fault == Fault::kKill;
    result->calls += o.callsOk + (o.errorCall >= 0 ? 1 : 0);
    if (o.wrong > 0) problem(r, "success with wrong data", o.wrongText);
    if (!exitStatus.empty()) {
      const int st = exitStatus[r];
      if (killed && !(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
        problem(r, "the killed rank did not die of SIGKILL", o.errorText);
      if (!killed && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        std::snprintf(text, sizeof(text), "process ended with %s %d",
                      WIFSIGNALED(st) ? "signal" : "status",
                      WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        problem(r, text, o.errorText);
        continue;  // what else it did not do follows from the crash
      }
    }
    if (killed) continue;
    if (o.phase != 4) problem(r, "did not finish", nullptr);
    if (o.errorCall != -2 && !victim) {
      result->errorsByCode[std::min<int>(std::max(o.errorRc, 0), ncclNumResults)]++;
      result->survivorErrorMs.push_back(o.errorCallMs);
    }
    if (job.fault == Fault::kNone) {
      if (o.errorCall != -2) problem(r, "error without a fault", o.errorText);
      if (o.teardownRc != ncclSuccess) problem(r, "ncclCommDestroy failed", nullptr);
      continue;
    }
    if (o.errorCall == -2) {
      allSurvivorsFailed = false;
      problem(r,
              victim ? "the aborted rank never got an error"
                     : "survivor finished every call without an error",
              nullptr);
    }
    if (o.teardownRc != ncclSuccess) problem(r, "ncclCommAbort after the error failed", nullptr);
    if (victim && o.abortRc != ncclSuccess) problem(r, "the fault's ncclCommAbort failed", nullptr);
  }
  result->faultSurvived =
      job.fault != Fault::kNone && allSurvivorsFailed && result->problems.empty();
}

}  // namespace soak
