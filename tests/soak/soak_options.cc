#include "tests/soak/soak_options.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace soak {

const char* usage() {
  return "usage: weft_soak [options]\n"
         "  --seconds S          run for S seconds (default 60)\n"
         "  --calls N            run until N rank-level calls instead (with --seconds 0)\n"
         "  --seed X             seed of the whole run (default: from the clock)\n"
         "  --max-ranks M        ranks per job, 2..8 (default 8)\n"
         "  --max-calls-per-job K (default 200)\n"
         "  --modes LIST         threads,processes (default both)\n"
         "  --transports LIST    local,shm,tcp (default all; local: thread jobs only)\n"
         "  --algos LIST         NCCL_ALGO values separated by '/', 'unset' for none\n"
         "                       (default unset/ring/tree/rhd/direct/rsag/^ring)\n"
         "  --fault-rate P       share of jobs that kill or abort a rank (default 0.25)\n"
         "  --max-count C        largest count (default 16777216)\n"
         "  --max-job-bytes B    buffers of all ranks of one call (default 536870912)\n"
         "  --timeout-ms T       WEFT_TIMEOUT_MS unless set in the environment (default 20000)\n"
         "  --hang-ms H          no progress this long is a hang (default timeout + 20000)\n"
         "  --warmup-jobs W      jobs before the flatness baseline (default 20)\n"
         "  --rss-bound-kib K    RSS growth allowed per 10,000 calls (default 64)\n"
         "  --rss-allowance-kib A RSS growth allowed in all besides (default 2048)\n"
         "  --min-flat-calls N   calls after warm-up needed to judge flatness (default 2000)\n"
         "  --status-seconds S   status line interval (default 60, 0: none)\n"
         "  --shared-shm         do not isolate /dev/shm in a mount namespace\n"
         "  --only-job I         run job I of --seed alone, to repeat one that failed\n"
         "  --verbose            print every job\n";
}

static bool hasWord(const std::string& list, const char* word) {
  std::stringstream s(list);
  std::string part;
  while (std::getline(s, part, ','))
    if (part == word) return true;
  return false;
}

bool parseOptions(int argc, char** argv, Options* o, std::string* error) {
  o->jobs.algos = {"", "ring", "tree", "rhd", "direct", "rsag", "^ring"};
  o->jobs.limits.maxJobBytes = 512u << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        *error = arg + " needs a value";
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    if (arg == "--verbose") {
      o->verbose = true;
      continue;
    }
    if (arg == "--shared-shm") {
      o->privateShm = false;
      continue;
    }
    if (!(v = value())) return false;
    if (arg == "--seconds") {
      o->seconds = std::atoi(v);
    } else if (arg == "--calls") {
      o->calls = std::atoll(v);
    } else if (arg == "--seed") {
      o->seed = std::strtoull(v, nullptr, 0);
    } else if (arg == "--max-ranks") {
      o->jobs.maxRanks = std::atoi(v);
    } else if (arg == "--max-calls-per-job") {
      o->jobs.maxCallsPerJob = std::atoi(v);
    } else if (arg == "--modes") {
      o->jobs.threads = hasWord(v, "threads");
      o->jobs.processes = hasWord(v, "processes");
    } else if (arg == "--transports") {
      o->jobs.local = hasWord(v, "local");
      o->jobs.shm = hasWord(v, "shm");
      o->jobs.tcp = hasWord(v, "tcp");
    } else if (arg == "--algos") {
      o->jobs.algos.clear();
      std::stringstream s(v);
      std::string part;
      while (std::getline(s, part, '/')) o->jobs.algos.push_back(part == "unset" ? "" : part);
    } else if (arg == "--fault-rate") {
      o->jobs.faultRate = std::atof(v);
    } else if (arg == "--max-count") {
      o->jobs.limits.maxCount = std::strtoull(v, nullptr, 0);
    } else if (arg == "--max-job-bytes") {
      o->jobs.limits.maxJobBytes = std::strtoull(v, nullptr, 0);
    } else if (arg == "--timeout-ms") {
      o->timeoutMs = std::atoi(v);
    } else if (arg == "--hang-ms") {
      o->hangMs = std::atoi(v);
    } else if (arg == "--warmup-jobs") {
      o->warmupJobs = std::atoi(v);
    } else if (arg == "--rss-bound-kib") {
      o->rssBoundKiB = std::atof(v);
    } else if (arg == "--rss-allowance-kib") {
      o->rssAllowanceKiB = std::atof(v);
    } else if (arg == "--min-flat-calls") {
      o->minFlatCalls = std::atoll(v);
    } else if (arg == "--only-job") {
      o->onlyJob = std::atoll(v);
    } else if (arg == "--status-seconds") {
      o->statusSeconds = std::atoi(v);
    } else {
      *error = "unknown option " + arg;
      return false;
    }
  }
  if (o->jobs.maxRanks < 2 || o->jobs.maxRanks > kMaxRanks) {
    *error = "--max-ranks must be 2..8";
    return false;
  }
  if (!o->jobs.threads && !o->jobs.processes) {
    *error = "--modes names neither threads nor processes";
    return false;
  }
  if (o->jobs.algos.empty()) o->jobs.algos.push_back("");
  if (o->seconds <= 0 && o->calls <= 0 && o->onlyJob < 0) {
    *error = "give --seconds or --calls";
    return false;
  }
  if (o->seed == 0)
    o->seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  return true;
}

}  // namespace soak
