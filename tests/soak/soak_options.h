// weft_soak's command line.
#pragma once
#include <cstdint>
#include <string>

#include "tests/soak/soak_job.h"

namespace soak {

struct Options {
  int seconds = 60;   // run for this long (0: run --calls calls instead)
  int64_t calls = 0;  // with --seconds 0: stop after this many rank-level calls
  uint64_t seed = 0;  // 0: from the clock (printed, so a run can be repeated)
  JobOptions jobs;
  int timeoutMs = 20000;          // WEFT_TIMEOUT_MS for the ranks, unless the environment sets it
  int hangMs = 0;                 // a job without progress this long is a hang (0: timeout + 20 s)
  int warmupJobs = 20;            // jobs before the flatness baseline is taken
  double rssBoundKiB = 64;        // most RSS growth allowed per 10,000 calls after warm-up
  double rssAllowanceKiB = 2048;  // plus this much in all (allocator noise)
  int64_t minFlatCalls = 2000;    // fewer calls after warm-up: growth is reported, not judged
  int settleMs = 5000;            // at the end, how long lingering threads and fds get to go
  int statusSeconds = 60;         // a status line this often (0: none)
  bool verbose = false;           // print every job
  int64_t onlyJob = -1;           // run only this job of the run's seed (to repeat one that failed)
  bool privateShm = true;         // count /dev/shm files in a private mount namespace when allowed
};

const char* usage();
bool parseOptions(int argc, char** argv, Options* o, std::string* error);

}  // namespace soak
