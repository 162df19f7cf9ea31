// weft_soak: random collectives in random jobs (2..8 ranks, threads or processes, local, shm or
// tcp, NCCL_ALGO settings, in and out of place), with ranks killed or aborted in some of them.
// Checks every result, that survivors of a fault always get an error and never hang, and that
// this process's RSS, fds and threads and the files in /dev/shm stay flat. See soak.sh.
#include <dirent.h>
#include <malloc.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/soak/soak_job.h"
#include "tests/soak/soak_options.h"

namespace soak {
namespace {

using Clock = std::chrono::steady_clock;

// A private /dev/shm (a mount namespace of this process and its children), so that the files
// counted are this run's alone. Must run before any thread starts.
bool privateDevShm() {
  if (unshare(CLONE_NEWNS) != 0) return false;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  return mount("soak-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") == 0;
}

std::vector<std::string> shmFiles(bool all) {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.' && (all || std::strncmp(e->d_name, "weft", 4) == 0))
        names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

int countEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

struct Sample {
  double rssKiB = 0;
  int fds = 0, threads = 0;
};

Sample sample() {
  malloc_trim(0);  // freed memory malloc keeps is not growth
  Sample s;
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  s.rssKiB = static_cast<double>(resident) * sysconf(_SC_PAGESIZE) / 1024.0;
  s.fds = countEntries("/proc/self/fd") - 1;  // less the directory being read
  s.threads = countEntries("/proc/self/task");
  return s;
}

struct Totals {
  int64_t jobs = 0, threadJobs = 0, processJobs = 0, calls = 0, supervisorCalls = 0;
  int64_t kills = 0, killsSurvived = 0, aborts = 0, abortsSurvived = 0;
  int64_t hangs = 0, wrong = 0, otherFailures = 0, failedJobs = 0, shmLeaked = 0;
  int64_t errorsByCode[ncclNumResults + 1] = {};
  double maxErrorMs = 0;
  int64_t timeoutDetections = 0;  // survivors whose failing call lasted the whole timeout
};

void report(const JobSpec& job, const JobResult& r, Totals* t, int* printed) {
  for (const std::string& p : r.problems) {
    if (p.find("wrong data") != std::string::npos)
      ++t->wrong;
    else if (p.rfind("HANG", 0) != 0)
      ++t->otherFailures;
    if ((*printed)++ < 60) std::printf("FAIL %s: %s\n", job.describe().c_str(), p.c_str());
  }
  if (r.hang) ++t->hangs;
  if (!r.problems.empty()) ++t->failedJobs;
}

}  // namespace

// Least-squares slope of y over x.
double slope(const std::vector<std::pair<double, double>>& points) {
  if (points.size() < 2) return 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : points) sx += x, sy += y, sxx += x * x, sxy += x * y;
  const double n = static_cast<double>(points.size()), d = n * sxx - sx * sx;
  return d > 0 ? (n * sxy - sx * sy) / d : 0;
}

int supervisorMain(const Options& o) {
  // Blocks of 128 KiB and more are mappings of their own, returned when freed: without this,
  // glibc raises the threshold as blocks are freed, and the soak's own large temporary tables
  // stay resident in malloc's arenas, hiding what the library keeps behind their noise.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  const bool isolated = o.privateShm && privateDevShm();
  // Orphans of rank processes become this process's children, so the check that none remains
  // after a job sees them too.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (!getenv("WEFT_TIMEOUT_MS")) setenv("WEFT_TIMEOUT_MS", std::to_string(o.timeoutMs).c_str(), 1);
  // Init waits for peers up to the bootstrap timeout: the same bound, so that hangMs covers it.
  if (!getenv("WEFT_BOOTSTRAP_TIMEOUT_MS"))
    setenv("WEFT_BOOTSTRAP_TIMEOUT_MS", getenv("WEFT_TIMEOUT_MS"), 1);
  // The soak reports every error itself; the library's warnings would drown its output.
  if (!getenv("NCCL_DEBUG") && !getenv("WEFT_DEBUG")) setenv("NCCL_DEBUG", "NONE", 1);
  const int timeoutMs = std::atoi(getenv("WEFT_TIMEOUT_MS"));
  const int hangMs =
      o.hangMs > 0 ? o.hangMs
                   : std::max(timeoutMs, std::atoi(getenv("WEFT_BOOTSTRAP_TIMEOUT_MS"))) + 20000;
  std::printf("soak: seed %llu, %s, /dev/shm %s, WEFT_TIMEOUT_MS=%s, hang after %d ms\n",
              static_cast<unsigned long long>(o.seed),
              o.seconds > 0 ? (std::to_string(o.seconds) + " s").c_str()
                            : (std::to_string(o.calls) + " calls").c_str(),
              isolated ? "private" : "shared with others (leak counts are approximate)",
              getenv("WEFT_TIMEOUT_MS"), hangMs);
  std::fflush(stdout);
  Totals t;
  int printed = 0;
  const size_t shmAtStart = shmFiles(isolated).size();
  Sample base;
  int64_t baseCalls = 0, baseJobs = 0;
  bool haveBase = false;
  std::vector<std::pair<double, double>> rssByCalls;  // after warm-up, after every thread job
  const auto start = Clock::now(), deadline = start + std::chrono::seconds(o.seconds);
  auto nextStatus = start + std::chrono::seconds(o.statusSeconds);
  bool fatal = false;
  for (int64_t i = 0;; ++i) {
    if (o.onlyJob >= 0 ? i > 0 : o.seconds > 0 ? Clock::now() >= deadline : t.calls >= o.calls)
      break;
    const JobSpec job = drawJob(o.seed, o.onlyJob >= 0 ? o.onlyJob : i, o.jobs);
    if (o.verbose) std::printf("%s\n", job.describe().c_str()), std::fflush(stdout);
    JobResult r;
    if (job.mode == Mode::kThreads) {
      fatal = !runThreadJob(job, hangMs, &r);
      ++t.threadJobs;
      t.supervisorCalls += r.calls;
    } else {
      runProcessJob(job, hangMs, &r);
      ++t.processJobs;
    }
    ++t.jobs;
    t.calls += r.calls;
    for (int c = 0; c <= ncclNumResults; ++c) t.errorsByCode[c] += r.errorsByCode[c];
    int slow = 0;
    for (double ms : r.survivorErrorMs) {
      t.maxErrorMs = std::max(t.maxErrorMs, ms);
      slow += ms >= 0.9 * timeoutMs;
    }
    t.timeoutDetections += slow;
    if (slow > 0 && t.timeoutDetections - slow < 20)
      std::printf("slow: %s: %d survivors learned of the fault only from WEFT_TIMEOUT_MS\n",
                  job.describe().c_str(), slow);
    // Every file a job made must be gone once its ranks are.
    if (isolated)
      for (const std::string& name : shmFiles(true)) {
        r.problems.push_back("left /dev/shm/" + name);
        ++t.shmLeaked;
        unlink(("/dev/shm/" + name).c_str());  // so that the next job is judged on its own
      }
    r.faultSurvived = r.faultSurvived && r.problems.empty();
    if (job.fault == Fault::kKill) ++t.kills, t.killsSurvived += r.faultSurvived;
    if (job.fault == Fault::kAbort) ++t.aborts, t.abortsSurvived += r.faultSurvived;
    report(job, r, &t, &printed);
    std::fflush(stdout);
    if (fatal) break;
    if (haveBase && job.mode == Mode::kThreads)
      rssByCalls.emplace_back(static_cast<double>(t.supervisorCalls), sample().rssKiB);
    if (!haveBase && t.jobs >= o.warmupJobs) {
      base = sample();
      baseCalls = t.supervisorCalls;
      baseJobs = t.threadJobs;
      haveBase = true;
    }
    if (o.statusSeconds > 0 && Clock::now() >= nextStatus) {
      nextStatus += std::chrono::seconds(o.statusSeconds);
      const Sample s = sample();
      std::printf(
          "status: %lld jobs, %lld calls, %lld failed jobs, rss %.0f KiB, %d fds, %d threads\n",
          static_cast<long long>(t.jobs), static_cast<long long>(t.calls),
          static_cast<long long>(t.failedJobs), s.rssKiB, s.fds, s.threads);
      std::fflush(stdout);
    }
  }
  // Threads and fds the last jobs' ranks leave may take a moment to go (a bootstrap root that
  // waits out its timeout is not a leak); RSS is what it is.
  Sample end = sample();
  for (int i = 0; haveBase && !fatal && i < o.settleMs / 100 &&
                  (end.fds > base.fds || end.threads > base.threads);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    end = sample();
  }
  if (!isolated)
    t.shmLeaked = std::max<int64_t>(0, static_cast<int64_t>(shmFiles(false).size()) - shmAtStart);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t measured = t.supervisorCalls - baseCalls;
  auto per10k = [](double delta, int64_t calls) { return calls > 0 ? delta * 1e4 / calls : 0.0; };
  // RSS moves by a few hundred KiB from job to job (buffers, pools): the trend over every job's
  // sample says more than the two ends.
  const double rss10k = slope(rssByCalls) * 1e4;
  const double fds10k = haveBase ? per10k(end.fds - base.fds, measured) : 0;
  const double threads10k = haveBase ? per10k(end.threads - base.threads, measured) : 0;
  const double shm10k = per10k(static_cast<double>(t.shmLeaked), t.calls);
  std::vector<std::string> flatness;
  if (haveBase && measured >= o.minFlatCalls) {
    // RSS moves by a few MiB with what the last jobs left in malloc's arenas: the growth must stay
    // within that allowance plus the bound per 10,000 calls.
    if (rss10k * measured / 1e4 > o.rssAllowanceKiB + o.rssBoundKiB * measured / 1e4)
      flatness.push_back("RSS grows");
    if (end.fds > base.fds) flatness.push_back("fds grow");
    if (end.threads > base.threads) flatness.push_back("threads grow");
  }
  if (t.shmLeaked > 0) flatness.push_back("/dev/shm files leak");
  for (const std::string& f : flatness) std::printf("FAIL flatness: %s\n", f.c_str());
  if (haveBase)
    std::printf(
        "flatness: over %lld calls in %lld thread jobs after warm-up: RSS %.0f -> %.0f KiB "
        "(trend %.2f KiB per 10,000 calls, %.2f KiB per job), fds %d -> %d, threads %d -> %d\n",
        static_cast<long long>(measured), static_cast<long long>(t.threadJobs - baseJobs),
        base.rssKiB, end.rssKiB, rss10k,
        t.threadJobs > baseJobs ? rss10k * measured / 1e4 / (t.threadJobs - baseJobs) : 0.0,
        base.fds, end.fds, base.threads, end.threads);
  std::printf("errors survivors saw:");
  for (int c = 1; c <= ncclNumResults; ++c)
    if (t.errorsByCode[c])
      std::printf(" %s x%lld",
                  c < ncclNumResults ? ncclGetErrorString(static_cast<ncclResult_t>(c)) : "other",
                  static_cast<long long>(t.errorsByCode[c]));
  std::printf(
      "; slowest failing call of a survivor %.0f ms; %lld survivors learned of the fault "
      "only from WEFT_TIMEOUT_MS\n",
      t.maxErrorMs, static_cast<long long>(t.timeoutDetections));
  const bool pass = t.failedJobs == 0 && flatness.empty() && !fatal;
  std::printf(
      "SOAK SUMMARY seed=%llu seconds=%.0f jobs=%lld (threads %lld, processes %lld) calls=%lld "
      "kills=%lld survived=%lld aborts=%lld survived=%lld timeout_detections=%lld hangs=%lld "
      "wrong=%lld "
      "other_failures=%lld failed_jobs=%lld growth_per_10k_calls: rss_kib=%.2f fds=%.3f "
      "threads=%.3f shm_files=%.3f (%lld files) result=%s\n",
      static_cast<unsigned long long>(o.seed), seconds, static_cast<long long>(t.jobs),
      static_cast<long long>(t.threadJobs), static_cast<long long>(t.processJobs),
      static_cast<long long>(t.calls), static_cast<long long>(t.kills),
      static_cast<long long>(t.killsSurvived), static_cast<long long>(t.aborts),
      static_cast<long long>(t.abortsSurvived), static_cast<long long>(t.timeoutDetections),
      static_cast<long long>(t.hangs), static_cast<long long>(t.wrong),
      static_cast<long long>(t.otherFailures), static_cast<long long>(t.failedJobs), rss10k, fds10k,
      threads10k, shm10k, static_cast<long long>(t.shmLeaked), pass ? "PASS" : "FAIL");
  std::fflush(stdout);
  if (fatal) _exit(1);  // ranks still blocked in the library: no orderly exit is possible
  return pass ? 0 : 1;
}

}  // namespace soak

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--rank-child") == 0)
    return soak::rankChildMain(argc - 2, argv + 2);
  soak::Options options;
  std::string error;
  if (!soak::parseOptions(argc, argv, &options, &error)) {
    std::fprintf(stderr, "%s\n%s", error.c_str(), soak::usage());
    return 2;
  }
  return soak::supervisorMain(options);
}
