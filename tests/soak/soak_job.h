// One soak job: 2..8 ranks, as threads of the supervisor or as processes, on one transport, with
// one NCCL_ALGO setting, running a random sequence of collectives; sometimes one rank is killed
// (processes) or aborted from a second thread while the others keep calling.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/soak/soak_calls.h"

namespace soak {

enum class Mode : uint8_t { kThreads, kProcesses };
enum class Transport : uint8_t { kLocal, kShm, kTcp };  // kLocal: ranks in one process only
enum class Fault : uint8_t { kNone, kKill, kAbort };
const char* modeName(Mode m);
const char* transportName(Transport t);
const char* faultName(Fault f);

// What jobs are drawn from.
struct JobOptions {
  int maxRanks = 8;
  int maxCallsPerJob = 200;
  bool threads = true, processes = true;
  bool local = true, shm = true, tcp = true;
  std::vector<std::string> algos = {""};  // NCCL_ALGO values ("" leaves it unset)
  double faultRate = 0.25;                // share of jobs with a fault
  CallLimits limits;
};

struct JobSpec {
  uint64_t seed = 0;
  int64_t index = 0;
  int nranks = 2;
  int calls = 1;
  Mode mode = Mode::kThreads;
  Transport transport = Transport::kShm;
  char algo[64] = {};
  bool initAll = false;  // threads: ncclCommInitAll instead of a thread per ncclCommInitRank
  Fault fault = Fault::kNone;
  int victim = 0;
  int faultCall = 0;  // the call during which the fault strikes; -1: during init (kill only)
  int faultDelayUs = 0;
  CallLimits limits;

  std::string describe() const;
};

JobSpec drawJob(uint64_t runSeed, int64_t index, const JobOptions& options);

// What one rank did. Plain data with atomics only: process jobs keep it in shared memory.
struct RankOutcome {
  std::atomic<int64_t> progress{0};  // bumped at every step: the watchdog's sign of life
  std::atomic<int32_t> phase{0};     // 0 not started, 1 init, 2 calls, 3 teardown, 4 done
  std::atomic<int32_t> currentCall{-1};
  int32_t initRc = -1;
  int32_t callsOk = 0;
  int32_t errorCall = -2;  // the call that returned an error; -1: init; -2: none
  int32_t errorRc = 0;
  double errorCallMs = 0;  // how long the failing call took
  int32_t wrong = 0;       // calls that succeeded with wrong results
  int32_t teardownRc = -1;
  int32_t abortRc = -1;  // the fault's ncclCommAbort of this (victim) rank
  char wrongText[240] = {};
  char errorText[240] = {};
};

// Runs rank `rank` of `job` in the calling thread. With `id`, the rank initialises its own
// communicator (ncclCommInitRank); else *slot already holds it. The rank owns teardown: whoever
// takes the handle out of *slot first (the rank, a fault's aborter, a watchdog) ends it.
void runRank(const JobSpec& job, int rank, const ncclUniqueId* id, std::atomic<ncclComm_t>* slot,
             RankOutcome* out);

// The result of a whole job, as the supervisor judges it.
struct JobResult {
  int64_t calls = 0;  // rank-level calls issued (each rank's collective or send/recv group)
  bool hang = false;
  bool faultSurvived = false;                 // a fault job in which every check held
  int errorsByCode[ncclNumResults + 1] = {};  // survivors' errors (the victim's are expected)
  std::vector<double> survivorErrorMs;        // how long each survivor's failing call took
  std::vector<std::string> problems;
};

// Runs a job in threads of this process; false when a hang left threads that could not be ended.
bool runThreadJob(const JobSpec& job, int hangMs, JobResult* result);
void runProcessJob(const JobSpec& job, int hangMs, JobResult* result);
// Entry of a rank process started by runProcessJob (argv after "--rank-child").
int rankChildMain(int argc, char** argv);

// Judges the outcomes of a finished job (not for hangs); fills result->problems.
void judge(const JobSpec& job, const RankOutcome* outcomes, const std::vector<int>& exitStatus,
           JobResult* result);

}  // namespace soak
