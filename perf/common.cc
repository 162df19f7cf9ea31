#include "perf/common.h"

#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "perf/mpi.h"
#include "perf/report.h"
#include "perf/world.h"
#include "weft/weft.h"

#ifndef WEFT_PERF_VERSION
#define WEFT_PERF_VERSION "0.1.0"
#endif

namespace weft::perf {

Expect DataView::unchanged(size_t k) const {
  if (inPlace) {
    int64_t j = static_cast<int64_t>(k) - sendStart_;
    if (j >= 0 && static_cast<size_t>(j) < sendCount_)
      return {coll_->input(*this, static_cast<size_t>(j)), 0};
  }
  return {0, 0};
}

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = 1024 * 1024;

struct Options {
  int nThreads = 1;
  int nGpus = 1;
  size_t minBytes = 32 * kMiB;
  size_t maxBytes = 32 * kMiB;
  size_t stepBytes = 1 * kMiB;
  size_t stepFactor = 1;
  int iters = 20;
  int aggIters = 1;
  int warmupIters = 1;
  int runCycles = 1;
  int parallelInit = 0;
  int check = 1;
  bool allOps = false;
  Op op = Op::kSum;
  bool allTypes = false;
  ncclDataType_t type = ncclFloat32;
  int root = 0;  // -1: every root
  int blocking = 0;
  int streamNull = 0;
  int timeout = 0;
  int reportCpu = 0;
  int average = 1;
  int registerMode = 0;
  int unalign = 0;
  std::vector<std::string> notes;  // "# ..." lines for flags that mean nothing in host mode
};

const std::string& hostName() {
  static const std::string name = [] {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) return std::string("unknown");
    return std::string(buf);
  }();
  return name;
}

[[noreturn]] void die(const std::string& msg) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: Test failure: %s\n", hostName().c_str(), msg.c_str());
  std::fflush(stderr);
  // Other threads may be blocked in collectives whose peers will never come: end the process.
  std::_Exit(2);
}

void ncclCheck(ncclResult_t r, const char* what, const char* file, int line) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  std::string msg = std::string(file) + ":" + std::to_string(line) + " '" + ncclGetErrorString(r) +
                    "' from " + what;
  if (last && *last) msg += ": " + std::string(last);
  std::fflush(stdout);
  std::fprintf(stderr, "%s: Test NCCL failure %s\n", hostName().c_str(), msg.c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

#define PERF_NCCL(call) ncclCheck((call), #call, __FILE__, __LINE__)

// ---- Command line ----------------------------------------------------------------------------

// A size with an optional K/M/G suffix (binary units), as nccl-tests reads -b/-e.
bool parseSize(const char* s, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  double unit = 1;
  if (*end) {
    switch (std::tolower(static_cast<unsigned char>(*end))) {
      case 'k':
        unit = 1024.0;
        break;
      case 'm':
        unit = 1024.0 * 1024;
        break;
      case 'g':
        unit = 1024.0 * 1024 * 1024;
        break;
      default:
        return false;
    }
    ++end;
    if (*end == 'b' || *end == 'B') ++end;
    if (*end) return false;
  }
  *out = static_cast<size_t>(v * unit);
  return true;
}

bool parseInt(const char* s, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 0);
  if (end == s || *end != '\0' || v < -1000000000L || v > 1000000000L) return false;
  *out = static_cast<int>(v);
  return true;
}

void usage(const char* program) {
  std::printf(
      "USAGE: %s\n"
      "\t[-t,--nthreads <threads per process>] (1)\n"
      "\t[-g,--ngpus <ranks per thread>] (1)\n"
      "\t[-b,--minbytes <min size in bytes, K/M/G suffix>] (32M)\n"
      "\t[-e,--maxbytes <max size in bytes>] (32M)\n"
      "\t[-i,--stepbytes <increment size>] (1M)\n"
      "\t[-f,--stepfactor <increment factor>] (disabled)\n"
      "\t[-n,--iters <iteration count>] (20)\n"
      "\t[-m,--agg_iters <calls aggregated in one group per iteration>] (1)\n"
      "\t[-w,--warmup_iters <warmup iteration count>] (1)\n"
      "\t[-N,--run_cycles <repeat the sweep, 0 = forever>] (1)\n"
      "\t[-p,--parallel_init <0/1>] (0)\n"
      "\t[-c,--check <checked iterations, 0 = no check>] (1)\n"
      "\t[-o,--op <sum/prod/min/max/avg/mulsum/all>] (sum)\n"
      "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/"
      "f8e4m3/f8e5m2/all>] (float)\n"
      "\t[-r,--root <root rank/all>] (0)\n"
      "\t[-z,--blocking <0 async, 1 wait+barrier per call, 2 wait per call, 3 wait+barrier per "
      "iteration>] (0)\n"
      "\t[-y,--stream_null <0 Weft host stream per rank, 1 NULL stream (blocking calls)>] (0)\n"
      "\t[-T,--timeout <seconds before the test fails, 0 = none>] (0)\n"
      "\t[-C,--report_cputime <0/1>] (0)\n"
      "\t[-a,--average <0 rank0, 1 avg, 2 min, 3 max>] (1)\n"
      "\t[-R,--local_register <0 none, 1 ncclCommRegister, 2 symmetric window>] (0)\n"
      "\t[-u,--unalign <misalign buffers by N elements>] (0)\n"
      "\t[-G,--cudagraph <n>] accepted, ignored: no CUDA graphs in host mode\n"
      "\t[-D,--device_implementation <n>] accepted, ignored: no device API in host mode\n"
      "\t[-h,--help]\n"
      "Processes: run under weftrun, srun or mpirun, or set RANK, WORLD_SIZE, MASTER_ADDR and\n"
      "MASTER_PORT as torchrun does (or WEFT_ID_FILE, a path all processes reach, for the id).\n",
      program);
}

// Returns -1 when the run should continue, else the exit status.
int parseOptions(int argc, char** argv, const char* program, Options* o) {
  static const option kLong[] = {{"nthreads", required_argument, nullptr, 't'},
                                 {"ngpus", required_argument, nullptr, 'g'},
                                 {"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepbytes", required_argument, nullptr, 'i'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"agg_iters", required_argument, nullptr, 'm'},
                                 {"warmup_iters", required_argument, nullptr, 'w'},
                                 {"run_cycles", required_argument, nullptr, 'N'},
                                 {"parallel_init", required_argument, nullptr, 'p'},
                                 {"check", required_argument, nullptr, 'c'},
                                 {"op", required_argument, nullptr, 'o'},
                                 {"datatype", required_argument, nullptr, 'd'},
                                 {"root", required_argument, nullptr, 'r'},
                                 {"blocking", required_argument, nullptr, 'z'},
                                 {"stream_null", required_argument, nullptr, 'y'},
                                 {"timeout", required_argument, nullptr, 'T'},
                                 {"cudagraph", required_argument, nullptr, 'G'},
                                 {"report_cputime", required_argument, nullptr, 'C'},
                                 {"average", required_argument, nullptr, 'a'},
                                 {"local_register", required_argument, nullptr, 'R'},
                                 {"unalign", required_argument, nullptr, 'u'},
                                 {"device_implementation", required_argument, nullptr, 'D'},
                                 {"cta_policy", required_argument, nullptr, 'x'},
                                 {"device_cta_count", required_argument, nullptr, 'V'},
                                 {"memory", required_argument, nullptr, 'M'},
                                 {"per_iter_timing", required_argument, nullptr, 'I'},
                                 {"per_iter_skip", required_argument, nullptr, 'K'},
                                 {"output_file", required_argument, nullptr, 'J'},
                                 {"report_timestamps", required_argument, nullptr, 'S'},
                                 {"help", no_argument, nullptr, 'h'},
                                 {nullptr, 0, nullptr, 0}};
  auto bad = [&](const char* what, const char* value) {
    std::fprintf(stderr, "%s: invalid value '%s' for %s\n", program, value, what);
    return 1;
  };
  int c;
  while ((c = getopt_long(argc, argv,
                          "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:R:u:D:x:V:M:I:K:J:S:h", kLong,
                          nullptr)) != -1) {
    int v = 0;
    switch (c) {
      case 't':
        if (!parseInt(optarg, &o->nThreads) || o->nThreads < 1) return bad("-t", optarg);
        break;
      case 'g':
        if (!parseInt(optarg, &o->nGpus) || o->nGpus < 1) return bad("-g", optarg);
        break;
      case 'b':
        if (!parseSize(optarg, &o->minBytes)) return bad("-b (minbytes)", optarg);
        break;
      case 'e':
        if (!parseSize(optarg, &o->maxBytes)) return bad("-e (maxbytes)", optarg);
        break;
      case 'i':
        if (!parseSize(optarg, &o->stepBytes)) return bad("-i (stepbytes)", optarg);
        break;
      case 'f':
        if (!parseSize(optarg, &o->stepFactor)) return bad("-f (stepfactor)", optarg);
        break;
      case 'n':
        if (!parseInt(optarg, &o->iters) || o->iters < 1) return bad("-n", optarg);
        break;
      case 'm':
        if (!parseInt(optarg, &o->aggIters) || o->aggIters < 1) return bad("-m", optarg);
        break;
      case 'w':
        if (!parseInt(optarg, &o->warmupIters) || o->warmupIters < 0) return bad("-w", optarg);
        break;
      case 'N':
        if (!parseInt(optarg, &o->runCycles) || o->runCycles < 0) return bad("-N", optarg);
        break;
      case 'p':
        if (!parseInt(optarg, &o->parallelInit)) return bad("-p", optarg);
        break;
      case 'c':
        if (!parseInt(optarg, &o->check) || o->check < 0) return bad("-c", optarg);
        break;
      case 'o':
        if (std::strcmp(optarg, "all") == 0) {
          o->allOps = true;
        } else if (!parseOp(optarg, &o->op)) {
          return bad("-o (sum, prod, min, max, avg, mulsum, all)", optarg);
        }
        break;
      case 'd':
        if (std::strcmp(optarg, "all") == 0) {
          o->allTypes = true;
        } else if (!parseType(optarg, &o->type)) {
          return bad(
              "-d (int8, uint8, int32, uint32, int64, uint64, half, float, double, "
              "bfloat16, f8e4m3, f8e5m2, all)",
              optarg);
        }
        break;
      case 'r':
        if (std::strcmp(optarg, "all") == 0) {
          o->root = -1;
        } else if (!parseInt(optarg, &o->root) || o->root < -1) {
          return bad("-r", optarg);
        }
        break;
      case 'z':
        if (!parseInt(optarg, &o->blocking) || o->blocking < 0 || o->blocking > 3)
          return bad("-z (0..3)", optarg);
        break;
      case 'y':
        if (!parseInt(optarg, &o->streamNull)) return bad("-y", optarg);
        break;
      case 'T':
        if (!parseInt(optarg, &o->timeout) || o->timeout < 0) return bad("-T", optarg);
        break;
      case 'C':
        if (!parseInt(optarg, &o->reportCpu)) return bad("-C", optarg);
        break;
      case 'a':
        if (!parseInt(optarg, &o->average) || o->average < 0 || o->average > 3)
          return bad("-a (0..3)", optarg);
        break;
      case 'R':
        if (!parseInt(optarg, &o->registerMode) || o->registerMode < 0 || o->registerMode > 2)
          return bad("-R (0..2)", optarg);
        break;
      case 'u':
        if (!parseInt(optarg, &o->unalign) || o->unalign < 0 || o->unalign > 4096)
          return bad("-u", optarg);
        break;
      case 'G':
        if (!parseInt(optarg, &v)) return bad("-G", optarg);
        if (v)
          o->notes.push_back("-G " + std::string(optarg) +
                             " ignored: CUDA graphs do not exist in host mode");
        break;
      case 'D':
        if (!parseInt(optarg, &v)) return bad("-D", optarg);
        if (v)
          o->notes.push_back("-D " + std::string(optarg) +
                             " ignored: no device API kernels in host mode");
        break;
      case 'x':
      case 'V':
      case 'M':
      case 'I':
      case 'K':
      case 'J':
      case 'S':
        o->notes.push_back(std::string("-") + static_cast<char>(c) + " " + optarg +
                           " ignored: not supported by the Weft perf tests");
        break;
      case 'h':
        usage(program);
        return 0;
      default:
        usage(program);
        return 1;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "%s: unexpected argument '%s'\n", program, argv[optind]);
    return 1;
  }
  if (o->minBytes > o->maxBytes) {
    std::fprintf(stderr, "%s: minbytes %zu is larger than maxbytes %zu\n", program, o->minBytes,
                 o->maxBytes);
    return 1;
  }
  if (o->stepFactor <= 1 && o->stepBytes == 0 && o->minBytes != o->maxBytes) {
    std::fprintf(stderr, "%s: the step (-i or -f) must make the size grow\n", program);
    return 1;
  }
  return -1;
}

// ---- The run ----------------------------------------------------------------------------------

// One rank this thread drives.
struct RankRes {
  int rank = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  char* sendAlloc = nullptr;
  char* recvAlloc = nullptr;
  void* sendReg = nullptr;
  void* recvReg = nullptr;
  ncclWindow_t sendWin = nullptr;
  ncclWindow_t recvWin = nullptr;
  ncclRedOp_t op = ncclSum;
  bool opCreated = false;
  alignas(16) unsigned char scratch[16] = {};  // one element for control allreduces
  std::vector<unsigned char> info;             // device report: this rank's record
  std::vector<unsigned char> infoAll;          // and everyone's
};

struct Worker {
  int index = 0;
  bool prints = false;  // thread 0 of process 0
  std::vector<RankRes> ranks;
  // Signs of progress, counted (a clock read per call would cost small calls a fifth of their
  // time); 0 = not timed.
  std::atomic<uint64_t> beats{0};
  uint64_t rep = 0;  // data seed, advanced identically on every rank
  double bwSum = 0;
  int bwCount = 0;
  int errors = 0;
};

// The sizes of one call of the sweep.
struct Shape {
  ncclDataType_t type = ncclFloat32;
  Op op = Op::kNone;
  int root = -1;
  size_t typeSize = 4;
  CollCounts c;
  size_t totalBytes = 0;  // max(send, recv) bytes: the size column and the rotation step
  size_t steps = 1;       // distinct buffer offsets the timed iterations rotate through
  size_t unalignBytes = 0;
};

constexpr size_t kInfoBytes = 128;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace

class Driver {
 public:
  Driver(const Options& o, const ProcessWorld& world, const Collective& coll, const char* program)
      : opt_(o), world_(world), coll_(coll), program_(program) {
    nranks_ = world.count * o.nThreads * o.nGpus;
  }

  int run();

 private:
  void printHeader(int libVersion) const;
  void initRanks(std::vector<RankRes*>& ranks);
  void setup(Worker& w);
  void teardown(Worker& w);
  void work(Worker& w);
  void deviceReport(Worker& w);
  void timeTest(Worker& w, ncclDataType_t type, Op op, int root);
  void benchTime(Worker& w, const Shape& s, bool inPlace);
  void setSize(Shape& s, size_t bytes) const;
  // A rank's send and receive pointers for one call, its buffers shifted by `shift` bytes.
  struct CallBuffers {
    const void* send;
    void* recv;
  };
  CallBuffers callBuffers(const RankRes& r, const Shape& s, bool inPlace, size_t shift) const;
  void startColl(Worker& w, const Shape& s, bool inPlace, int first, int calls = 1);
  void afterCall(Worker& w);
  void complete(Worker& w);
  void barrier(Worker& w);
  template <class T, class F>
  T allReduce(Worker& w, F valueOf, ncclDataType_t type, ncclRedOp_t op);
  double combineTime(Worker& w, double sec);
  DataView view(const RankRes& r, const Shape& s, bool inPlace, const ValueModel* vm) const;
  void initData(Worker& w, const Shape& s, bool inPlace, const ValueModel& vm);
  int64_t checkData(Worker& w, const RankRes& r, const Shape& s, bool inPlace,
                    const ValueModel& vm);
  void touch(Worker& w) const {
    if (opt_.timeout > 0)
      w.beats.store(w.beats.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void watchdog();

  const Options& opt_;
  const ProcessWorld& world_;
  const Collective& coll_;
  const char* program_;
  int nranks_ = 1;
  ncclUniqueId id_{};
  std::string idPath_;
  std::vector<ncclDataType_t> types_;
  std::vector<Op> ops_;
  size_t bufBytes_ = 0;    // per buffer, before unalignment
  size_t allocBytes_ = 0;  // per buffer, as allocated
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> finished_{false};
};

void Driver::printHeader(int libVersion) const {
  const Options& o = opt_;
  std::printf("# Weft perf tests version %s nccl-headers=%d nccl-library=%d\n", WEFT_PERF_VERSION,
              NCCL_VERSION_CODE, libVersion);
  std::printf("# Collective test starting: %s\n", program_);
  std::printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: %d unalign: %d\n",
      o.nThreads, o.nGpus, o.minBytes, o.maxBytes, o.stepFactor > 1 ? o.stepFactor : o.stepBytes,
      o.stepFactor > 1 ? "factor" : "bytes", o.warmupIters, o.iters, o.aggIters, o.check, 0,
      o.unalign);
  if (o.blocking == 1)
    std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o.blocking == 2)
    std::printf("# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  if (o.blocking == 3)
    std::printf("# Blocking Enabled: wait for completion and barrier after each iteration \n");
  if (o.parallelInit)
    std::printf("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  for (const std::string& n : o.notes) std::printf("# Note: %s\n", n.c_str());
  std::printf("#\n");
  std::fflush(stdout);
}

void Driver::initRanks(std::vector<RankRes*>& ranks) {
  PERF_NCCL(ncclGroupStart());
  for (RankRes* r : ranks) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    PERF_NCCL(ncclCommInitRankConfig(&r->comm, nranks_, id_, r->rank, &config));
  }
  PERF_NCCL(ncclGroupEnd());
}

void Driver::setup(Worker& w) {
  for (RankRes& r : w.ranks) {
    PERF_NCCL(ncclMemAlloc(reinterpret_cast<void**>(&r.sendAlloc), allocBytes_));
    PERF_NCCL(ncclMemAlloc(reinterpret_cast<void**>(&r.recvAlloc), allocBytes_));
    if (opt_.registerMode == 1) {
      PERF_NCCL(ncclCommRegister(r.comm, r.sendAlloc, allocBytes_, &r.sendReg));
      PERF_NCCL(ncclCommRegister(r.comm, r.recvAlloc, allocBytes_, &r.recvReg));
    }
    if (!opt_.streamNull) PERF_NCCL(weftStreamCreate(&r.stream));
  }
  if (opt_.registerMode == 2) {
    // Window registration is collective: one group for the ranks of this thread.
    PERF_NCCL(ncclGroupStart());
    for (RankRes& r : w.ranks) {
      PERF_NCCL(ncclCommWindowRegister(r.comm, r.sendAlloc, allocBytes_, &r.sendWin,
                                       NCCL_WIN_COLL_SYMMETRIC));
      PERF_NCCL(ncclCommWindowRegister(r.comm, r.recvAlloc, allocBytes_, &r.recvWin,
                                       NCCL_WIN_COLL_SYMMETRIC));
    }
    PERF_NCCL(ncclGroupEnd());
  }
}

void Driver::teardown(Worker& w) {
  for (RankRes& r : w.ranks) {
    if (r.stream) PERF_NCCL(weftStreamDestroy(r.stream));
    r.stream = nullptr;
  }
  if (opt_.registerMode == 2) {
    PERF_NCCL(ncclGroupStart());
    for (RankRes& r : w.ranks) {
      PERF_NCCL(ncclCommWindowDeregister(r.comm, r.sendWin));
      PERF_NCCL(ncclCommWindowDeregister(r.comm, r.recvWin));
    }
    PERF_NCCL(ncclGroupEnd());
  }
  for (RankRes& r : w.ranks) {
    if (r.sendReg) PERF_NCCL(ncclCommDeregister(r.comm, r.sendReg));
    if (r.recvReg) PERF_NCCL(ncclCommDeregister(r.comm, r.recvReg));
    PERF_NCCL(ncclMemFree(r.sendAlloc));
    PERF_NCCL(ncclMemFree(r.recvAlloc));
    PERF_NCCL(ncclCommDestroy(r.comm));
    r.comm = nullptr;
  }
}

void Driver::complete(Worker& w) {
  for (RankRes& r : w.ranks)
    if (r.stream) PERF_NCCL(weftStreamSynchronize(r.stream));
  for (RankRes& r : w.ranks) {
    ncclResult_t async = ncclSuccess;
    PERF_NCCL(ncclCommGetAsyncError(r.comm, &async));
    if (async != ncclSuccess && async != ncclInProgress)
      ncclCheck(async, "ncclCommGetAsyncError (asynchronous error)", __FILE__, __LINE__);
  }
  touch(w);
}

template <class T, class F>
T Driver::allReduce(Worker& w, F valueOf, ncclDataType_t type, ncclRedOp_t op) {
  static_assert(sizeof(T) <= sizeof(RankRes::scratch));
  for (RankRes& r : w.ranks) {
    T v = valueOf(r);
    std::memcpy(r.scratch, &v, sizeof v);
  }
  const bool group = w.ranks.size() > 1;
  if (group) PERF_NCCL(ncclGroupStart());
  for (RankRes& r : w.ranks)
    PERF_NCCL(ncclAllReduce(r.scratch, r.scratch, 1, type, op, r.comm, r.stream));
  if (group) PERF_NCCL(ncclGroupEnd());
  complete(w);
  T out;
  std::memcpy(&out, w.ranks.front().scratch, sizeof out);
  return out;
}

// Every rank of every thread and process: one allreduce of one int, waited for.
void Driver::barrier(Worker& w) {
  allReduce<int32_t>(
      w, [](const RankRes&) { return int32_t{1}; }, ncclInt32, ncclSum);
}

double Driver::combineTime(Worker& w, double sec) {
  switch (opt_.average) {
    case 0:
      return allReduce<double>(
          w, [&](const RankRes& r) { return r.rank == 0 ? sec : 0.0; }, ncclFloat64, ncclSum);
    case 2:
      return allReduce<double>(
          w, [&](const RankRes&) { return sec; }, ncclFloat64, ncclMin);
    case 3:
      return allReduce<double>(
          w, [&](const RankRes&) { return sec; }, ncclFloat64, ncclMax);
    default:
      return allReduce<double>(
                 w, [&](const RankRes&) { return sec; }, ncclFloat64, ncclSum) /
             nranks_;
  }
}

void Driver::deviceReport(Worker& w) {
  for (RankRes& r : w.ranks) {
    r.info.assign(kInfoBytes, 0);
    r.infoAll.assign(kInfoBytes * static_cast<size_t>(nranks_), 0);
    int32_t fields[2] = {r.rank, static_cast<int32_t>(::getpid())};
    std::memcpy(r.info.data(), fields, sizeof fields);
    std::snprintf(reinterpret_cast<char*>(r.info.data()) + sizeof fields,
                  kInfoBytes - sizeof fields, "%s", hostName().c_str());
  }
  const bool group = w.ranks.size() > 1;
  if (group) PERF_NCCL(ncclGroupStart());
  for (RankRes& r : w.ranks)
    PERF_NCCL(
        ncclAllGather(r.info.data(), r.infoAll.data(), kInfoBytes, ncclUint8, r.comm, r.stream));
  if (group) PERF_NCCL(ncclGroupEnd());
  complete(w);
  if (!w.prints) return;
  std::printf("# Using devices\n");
  const unsigned char* all = w.ranks.front().infoAll.data();
  for (int i = 0; i < nranks_; ++i) {
    const unsigned char* rec = all + static_cast<size_t>(i) * kInfoBytes;
    int32_t fields[2];
    std::memcpy(fields, rec, sizeof fields);
    char host[kInfoBytes];
    std::memcpy(host, rec + sizeof fields, kInfoBytes - sizeof fields);
    host[kInfoBytes - sizeof fields - 1] = '\0';
    std::printf("#  Rank %2d Group %2d Pid %6d on %10s cpu\n", fields[0], 0, fields[1], host);
  }
  std::fflush(stdout);
}

void Driver::setSize(Shape& s, size_t bytes) const {
  s.c = coll_.counts(bytes / s.typeSize, nranks_);
  s.totalBytes = std::max(s.c.send, s.c.recv) * s.typeSize;
  s.steps = s.totalBytes ? std::max<size_t>(1, bufBytes_ / s.totalBytes) : 1;
}

Driver::CallBuffers Driver::callBuffers(const RankRes& r, const Shape& s, bool inPlace,
                                        size_t shift) const {
  char* recv = r.recvAlloc + shift;
  const size_t rank = static_cast<size_t>(r.rank);
  if (!inPlace) return {r.sendAlloc + shift, recv};
  return {recv + s.c.sendInPlaceOffset * s.typeSize * rank,
          recv + s.c.recvInPlaceOffset * s.typeSize * rank};
}

// Issues `calls` consecutive iterations (one aggregated group), starting at iteration `first`.
void Driver::startColl(Worker& w, const Shape& s, bool inPlace, int first, int calls) {
  touch(w);
  const int rounds = coll_.rounds(nranks_);
  const bool group = calls > 1 || w.ranks.size() > 1;
  for (int round = 0; round < rounds; ++round) {
    if (group) PERF_NCCL(ncclGroupStart());
    for (int call = 0; call < calls; ++call) {
      // Rotate through the buffer so consecutive iterations use different addresses (catches
      // stale pointers and keeps the caches honest), as nccl-tests does.
      const size_t iter = static_cast<size_t>(first + call);
      const size_t shift = (s.steps > 1 ? s.totalBytes * (iter % s.steps) : 0) + s.unalignBytes;
      for (RankRes& r : w.ranks) {
        const CallBuffers b = callBuffers(r, s, inPlace, shift);
        PERF_NCCL(coll_.runRound(round, b.send, b.recv, s.c.param, s.type, r.op, s.root, r.comm,
                                 r.stream));
      }
    }
    if (group) PERF_NCCL(ncclGroupEnd());
  }
}

void Driver::afterCall(Worker& w) {
  if (opt_.blocking == 1 || opt_.blocking == 2) {
    complete(w);
    if (opt_.blocking == 1) barrier(w);
  }
}

DataView Driver::view(const RankRes& r, const Shape& s, bool inPlace, const ValueModel* vm) const {
  DataView v;
  v.rank = r.rank;
  v.nranks = nranks_;
  v.root = s.root;
  v.count = s.c.param;
  v.inPlace = inPlace;
  v.values_ = vm;
  v.coll_ = &coll_;
  v.sendCount_ = s.c.send;
  if (inPlace) {
    v.sendStart_ = static_cast<int64_t>(s.c.sendInPlaceOffset * static_cast<size_t>(r.rank)) -
                   static_cast<int64_t>(s.c.recvInPlaceOffset * static_cast<size_t>(r.rank));
  }
  return v;
}

// Zeroes the receive region and writes the closed-form input (iteration 0's buffers).
void Driver::initData(Worker& w, const Shape& s, bool inPlace, const ValueModel& vm) {
  const size_t ts = s.typeSize;
  for (RankRes& r : w.ranks) {
    const size_t rank = static_cast<size_t>(r.rank);
    char* recvBase = r.recvAlloc + s.unalignBytes;
    size_t zeroElems = s.c.recv;
    if (inPlace) {
      zeroElems = std::max(s.c.sendInPlaceOffset * rank + s.c.send,
                           s.c.recvInPlaceOffset * rank + s.c.recv);
    }
    std::memset(recvBase, 0, zeroElems * ts);
    char* sendPtr =
        inPlace ? recvBase + s.c.sendInPlaceOffset * ts * rank : r.sendAlloc + s.unalignBytes;
    DataView v = view(r, s, inPlace, &vm);
    for (size_t i = 0; i < s.c.send; ++i) {
      storeValue(s.type, sendPtr, i, coll_.input(v, i));
      if ((i & 0xFFFFF) == 0xFFFFF) touch(w);
    }
  }
}

int64_t Driver::checkData(Worker& w, const RankRes& r, const Shape& s, bool inPlace,
                          const ValueModel& vm) {
  static const bool debug = std::getenv("WEFT_PERF_DEBUG") != nullptr;
  const size_t ts = s.typeSize;
  const char* recv = r.recvAlloc + s.unalignBytes +
                     (inPlace ? s.c.recvInPlaceOffset * ts * static_cast<size_t>(r.rank) : 0);
  DataView v = view(r, s, inPlace, &vm);
  int64_t wrong = 0;
  for (size_t k = 0; k < s.c.recv; ++k) {
    const double got = loadValue(s.type, recv, k);
    const Expect want = coll_.expected(v, k);
    if (!matches(got, want)) {
      ++wrong;
      if (debug && wrong <= 8) {
        std::fprintf(stderr, "[rank %d] %s %s %s: element %zu is %.17g, expected %.17g (tol %g)\n",
                     r.rank, typeInfo(s.type).name, opName(s.op),
                     inPlace ? "in-place" : "out-of-place", k, got, want.value, want.tol);
      }
    }
    if ((k & 0xFFFFF) == 0xFFFFF) touch(w);
  }
  return wrong;
}

void Driver::benchTime(Worker& w, const Shape& s, bool inPlace) {
  if (opt_.check) initData(w, s, inPlace, ValueModel(s.type, s.op, nranks_, w.rep++));

  // One call to line everybody up, then a barrier.
  startColl(w, s, inPlace, 0);
  complete(w);
  barrier(w);

  const int agg = opt_.aggIters;
  // One call per iteration on one rank's buffers that never move: the loop then does nothing
  // else (a loop of MPI_Bcast calls is all the peers' benchmarks time either).
  const bool plain = agg == 1 && w.ranks.size() == 1 && coll_.rounds(nranks_) == 1 &&
                     s.steps <= 1 && opt_.blocking == 0;
  const RankRes& r0 = w.ranks.front();
  const CallBuffers b0 = callBuffers(r0, s, inPlace, s.unalignBytes);
  const auto start = Clock::now();
  if (plain) {
    for (int iter = 0; iter < opt_.iters; ++iter) {
      touch(w);
      PERF_NCCL(coll_.runRound(0, b0.send, b0.recv, s.c.param, s.type, r0.op, s.root, r0.comm,
                               r0.stream));
    }
  }
  for (int iter = 0; !plain && iter < opt_.iters; ++iter) {
    startColl(w, s, inPlace, iter * agg, agg);
    afterCall(w);
    if (opt_.blocking == 3) {
      complete(w);
      barrier(w);
    }
  }
  const double calls = static_cast<double>(opt_.iters) * agg;
  const double cpuSec = seconds(start) / calls;
  complete(w);
  double sec = seconds(start) / calls;
  sec = combineTime(w, sec);

  const double shownSec = opt_.reportCpu ? cpuSec : sec;
  const double algBw =
      shownSec > 0 ? coll_.algBytes(s.c.param, s.typeSize, nranks_) / 1.0e9 / shownSec : 0;
  const double busBw = algBw * coll_.busFactor(nranks_);
  barrier(w);

  int64_t wrong = -1;  // N/A
  const bool checkable = !inPlace || coll_.checksInPlace();
  if (opt_.check > 0 && checkable) {
    for (int c = 0; c < opt_.check; ++c) {
      ValueModel vm(s.type, s.op, nranks_, w.rep++);
      initData(w, s, inPlace, vm);
      startColl(w, s, inPlace, 0);
      complete(w);
      std::vector<int64_t> local;
      for (RankRes& r : w.ranks) local.push_back(checkData(w, r, s, inPlace, vm));
      size_t next = 0;
      wrong = allReduce<int64_t>(
          w, [&](const RankRes&) { return local[next++]; }, ncclInt64, ncclSum);
      if (wrong) break;
    }
    if (wrong > 0) ++w.errors;
  }
  if (w.prints) printRowPlacement(shownSec * 1.0e6, algBw, busBw, wrong);
  w.bwSum += busBw;
  ++w.bwCount;
}

void Driver::timeTest(Worker& w, ncclDataType_t type, Op op, int root) {
  Shape s;
  s.type = type;
  s.op = op;
  s.root = root;
  s.typeSize = typeInfo(type).size;
  s.unalignBytes = static_cast<size_t>(opt_.unalign) * s.typeSize;

  barrier(w);
  for (RankRes& r : w.ranks) {
    r.opCreated = false;
    switch (op) {
      case Op::kProd:
        r.op = ncclProd;
        break;
      case Op::kMax:
        r.op = ncclMax;
        break;
      case Op::kMin:
        r.op = ncclMin;
        break;
      case Op::kAvg:
        r.op = ncclAvg;
        break;
      case Op::kMulSum: {
        unsigned char scalar[16] = {};
        storeValue(type, scalar, 0, ValueModel::premulScalar(r.rank));
        PERF_NCCL(ncclRedOpCreatePreMulSum(&r.op, scalar, type, ncclScalarHostImmediate, r.comm));
        r.opCreated = true;
        break;
      }
      default:
        r.op = ncclSum;
        break;
    }
  }

  // Warm up at the largest and the smallest size, out of place and in place: Weft builds a plan
  // per call shape, and in place is a shape of its own.
  for (size_t bytes : {opt_.maxBytes, opt_.minBytes}) {
    setSize(s, bytes);
    for (bool inPlace : {false, true})
      for (int iter = 0; iter < opt_.warmupIters; ++iter) {
        startColl(w, s, inPlace, iter);
        afterCall(w);
      }
    complete(w);
  }

  for (size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes;) {
    setSize(s, bytes);
    if (w.prints) {
      printRowStart(s.totalBytes, s.c.param, typeInfo(type).name, opName(op), root);
    }
    benchTime(w, s, false);
    benchTime(w, s, true);
    if (w.prints) printRowEnd();
    size_t next = opt_.stepFactor > 1 ? bytes * opt_.stepFactor : bytes + opt_.stepBytes;
    if (bytes == 0 && opt_.stepFactor > 1) next = 1;  // -b 0 -f F: 0, 1, F, F^2, ...
    if (next <= bytes) break;                         // overflow
    bytes = next;
  }

  for (RankRes& r : w.ranks) {
    if (r.opCreated) PERF_NCCL(ncclRedOpDestroy(r.op, r.comm));
    r.opCreated = false;
    r.op = ncclSum;
  }
}

void Driver::work(Worker& w) {
  if (opt_.parallelInit) {
    std::vector<RankRes*> mine;
    for (RankRes& r : w.ranks) mine.push_back(&r);
    initRanks(mine);
  }
  setup(w);
  deviceReport(w);
  barrier(w);
  // Every rank has joined: the id file has served its purpose.
  if (w.prints && world_.count > 1 && !idPath_.empty()) ::unlink(idPath_.c_str());
  if (w.prints) printTableHeader(opt_.reportCpu != 0);

  const std::string why = coll_.unsupported(nranks_);
  if (!why.empty()) {
    if (w.prints) std::printf("%s\n", why.c_str());
  } else {
    std::vector<int> roots;
    if (!coll_.rooted()) {
      roots.push_back(-1);
    } else if (opt_.root == -1) {
      for (int r = 0; r < nranks_; ++r) roots.push_back(r);
    } else {
      roots.push_back(opt_.root);
    }
    for (int cycle = 0; opt_.runCycles == 0 || cycle < opt_.runCycles; ++cycle) {
      for (ncclDataType_t t : types_)
        for (Op op : ops_)
          for (int root : roots) timeTest(w, t, op, root);
    }
  }
  barrier(w);
  w.beats.store(0);
  teardown(w);
}

void Driver::watchdog() {
  const int64_t limit = static_cast<int64_t>(opt_.timeout) * 1000000000LL;
  // Per worker: the count last seen and when it last changed.
  std::vector<std::pair<uint64_t, int64_t>> seen(workers_.size(), {0, nowNs()});
  while (!finished_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t now = nowNs();
    for (size_t i = 0; i < workers_.size(); ++i) {
      const Worker& w = *workers_[i];
      const uint64_t b = w.beats.load(std::memory_order_relaxed);
      if (b == 0 || b != seen[i].first) {
        seen[i] = {b, now};
        continue;
      }
      if (now - seen[i].second > limit) {
        std::fflush(stdout);
        std::fprintf(stderr, "%s: Test timeout (%ds) %s:%d: thread %d made no progress\n",
                     hostName().c_str(), opt_.timeout, __FILE__, __LINE__, w.index);
        std::fflush(stderr);
        std::_Exit(3);
      }
    }
  }
}

int Driver::run() {
  int libVersion = 0;
  PERF_NCCL(ncclGetVersion(&libVersion));
  const bool mainProcess = world_.index == 0;
  if (mainProcess) printHeader(libVersion);

  if (coll_.rooted() && opt_.root >= nranks_) {
    if (mainProcess)
      std::fprintf(stderr, "%s: root %d is out of range for %d ranks\n", program_, opt_.root,
                   nranks_);
    return 1;
  }

  types_ = opt_.allTypes ? allTypes() : std::vector<ncclDataType_t>{opt_.type};
  if (!coll_.reduces()) {
    ops_ = {Op::kNone};
  } else {
    ops_ = opt_.allOps ? allOps() : std::vector<Op>{opt_.op};
  }
  size_t maxTypeSize = 1;
  for (ncclDataType_t t : types_) {
    const size_t ts = typeInfo(t).size;
    maxTypeSize = std::max(maxTypeSize, ts);
    CollCounts c = coll_.counts(opt_.maxBytes / ts, nranks_);
    bufBytes_ = std::max(bufBytes_, std::max(c.send, c.recv) * ts);
  }
  allocBytes_ = bufBytes_ + static_cast<size_t>(opt_.unalign) * maxTypeSize;
  allocBytes_ = std::max<size_t>(64, (allocBytes_ + 63) / 64 * 64);

  // The unique id: made here when alone, else shared through MPI, through the file weftrun
  // names, or derived alike by every process from its launcher's environment.
  try {
    if (world_.count > 1 && mpiShareUniqueId(world_, &id_)) {
      // Started by mpirun/srun: the id went out with MPI_Bcast.
    } else if (const char* path = std::getenv("WEFT_ID_FILE"); world_.count > 1 && path && *path) {
      idPath_ = path;
      double wait = 120;
      if (const char* t = std::getenv("WEFT_ID_TIMEOUT")) wait = std::atof(t);
      if (opt_.timeout > 0) wait = std::max(wait, static_cast<double>(opt_.timeout));
      id_ = shareUniqueId(world_, idPath_, wait);
    } else if (world_.count > 1) {
      // torchrun-style MASTER_ADDR/MASTER_PORT, or srun's job step: no shared file needed.
      id_ = deriveUniqueId(world_);
    } else {
      PERF_NCCL(ncclGetUniqueId(&id_));
    }
  } catch (const std::exception& e) {
    die(e.what());
  }

  for (int t = 0; t < opt_.nThreads; ++t) {
    auto w = std::make_unique<Worker>();
    w->index = t;
    w->prints = mainProcess && t == 0;
    for (int g = 0; g < opt_.nGpus; ++g) {
      RankRes r;
      r.rank = (world_.index * opt_.nThreads + t) * opt_.nGpus + g;
      w->ranks.push_back(std::move(r));
    }
    workers_.push_back(std::move(w));
  }

  if (!opt_.parallelInit) {
    std::vector<RankRes*> all;
    for (auto& w : workers_)
      for (RankRes& r : w->ranks) all.push_back(&r);
    initRanks(all);
  }

  std::thread dog;
  if (opt_.timeout > 0) dog = std::thread([this] { watchdog(); });
  std::vector<std::thread> threads;
  for (int t = 1; t < opt_.nThreads; ++t)
    threads.emplace_back([this, t] { work(*workers_[static_cast<size_t>(t)]); });
  work(*workers_.front());
  for (auto& th : threads) th.join();
  finished_.store(true);
  if (dog.joinable()) dog.join();

  const Worker& w0 = *workers_.front();
  const double avgBw = w0.bwCount ? w0.bwSum / w0.bwCount : 0.0;
  double minBw = -1;
  if (const char* m = std::getenv("NCCL_TESTS_MIN_BW")) minBw = std::atof(m);
  if (mainProcess) printFooter(w0.errors, avgBw, minBw, program_);
  if (w0.errors > 0) return 1;
  if (minBw >= 0 && avgBw < 0.9 * minBw) return 1;
  return 0;
}

int perfMain(int argc, char** argv, const Collective& coll) {
  setlinebuf(stdout);
  const char* slash = std::strrchr(argv[0], '/');
  const char* program = slash ? slash + 1 : argv[0];
  Options opt;
  int status = parseOptions(argc, argv, program, &opt);
  if (status >= 0) return status;
  ProcessWorld world;
  try {
    if (!mpiStart(&argc, &argv, &world)) world = discoverWorld();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  Driver driver(opt, world, coll, program);
  int code = driver.run();
  mpiStop();
  return code;
}

}  // namespace weft::perf
