#include "perf/driver.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "perf/mpi.h"
#include "perf/report.h"
#include "weft/weft.h"

#ifndef WEFT_PERF_VERSION
#define WEFT_PERF_VERSION "0.1.0"
#endif

namespace weft::perf {
namespace {

// The device report's record per rank: rank, pid and GPU ordinal, the GPU's PCI bus id, then
// the host's name.
constexpr size_t kInfoBytes = 128;
constexpr size_t kInfoBusOffset = 3 * sizeof(int32_t);
constexpr size_t kInfoHostOffset = 32;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

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
  std::printf("# %s\n", memoryLine_.c_str());
  for (const std::string& n : o.notes) std::printf("# Note: %s\n", n.c_str());
  std::printf("#\n");
  std::fflush(stdout);
}

void Driver::initRanks(std::vector<RankRes*>& ranks) {
  PERF_NCCL(ncclGroupStart());
  for (RankRes* r : ranks) {
    if (dev_) dev_->use(r->device);  // the communicator's GPU is the current one, as in NCCL
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    PERF_NCCL(ncclCommInitRankConfig(&r->comm, nranks_, id_, r->rank, &config));
  }
  PERF_NCCL(ncclGroupEnd());
}

char* Driver::hostSide(RankRes& r, const char* p, bool inRecv) const {
  if (!dev_) return const_cast<char*>(p);
  const char* base = inRecv ? r.recvAlloc : r.sendAlloc;
  return (inRecv ? r.recvHost : r.sendHost).data() + (p - base);
}

void Driver::setup(Worker& w) {
  for (RankRes& r : w.ranks) {
    if (dev_) {
      bindDevice(w, r);
      r.sendAlloc = static_cast<char*>(dev_->alloc(allocBytes_));
      r.recvAlloc = static_cast<char*>(dev_->alloc(allocBytes_));
      r.sendHost.assign(allocBytes_, 0);
      r.recvHost.assign(allocBytes_, 0);
      r.start = dev_->createEvent();
      r.stop = dev_->createEvent();
    } else {
      // Host memory even where a CUDA context is current (ncclMemAlloc then gives device memory).
      const size_t pageBytes = (allocBytes_ + 4095) / 4096 * 4096;
      r.sendAlloc = static_cast<char*>(std::aligned_alloc(4096, pageBytes));
      r.recvAlloc = static_cast<char*>(std::aligned_alloc(4096, pageBytes));
      if (!r.sendAlloc || !r.recvAlloc) {
        std::fprintf(stderr, "out of host memory for %zu-byte buffers\n", pageBytes);
        std::exit(2);
      }
    }
    if (opt_.registerMode == 1) {
      PERF_NCCL(ncclCommRegister(r.comm, r.sendAlloc, allocBytes_, &r.sendReg));
      PERF_NCCL(ncclCommRegister(r.comm, r.recvAlloc, allocBytes_, &r.recvReg));
    }
    if (opt_.streamNull) continue;
    if (dev_)
      r.stream = dev_->createStream();
    else
      PERF_NCCL(weftStreamCreate(&r.stream));
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
    if (dev_) {
      bindDevice(w, r);
      dev_->destroyStream(r.stream);
      dev_->destroyEvent(r.start);
      dev_->destroyEvent(r.stop);
      r.start = r.stop = nullptr;
    } else if (r.stream) {
      PERF_NCCL(weftStreamDestroy(r.stream));
    }
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
    if (dev_) {
      bindDevice(w, r);
      dev_->release(r.sendAlloc);
      dev_->release(r.recvAlloc);
    } else {
      std::free(r.sendAlloc);
      std::free(r.recvAlloc);
    }
    PERF_NCCL(ncclCommDestroy(r.comm));
    r.comm = nullptr;
  }
}

void Driver::complete(Worker& w) {
  for (RankRes& r : w.ranks) {
    if (dev_) {
      bindDevice(w, r);
      dev_->synchronize(r.stream);  // null: the legacy default stream
    } else if (r.stream) {
      PERF_NCCL(weftStreamSynchronize(r.stream));
    }
  }
  for (RankRes& r : w.ranks) {
    ncclResult_t async = ncclSuccess;
    PERF_NCCL(ncclCommGetAsyncError(r.comm, &async));
    if (async != ncclSuccess && async != ncclInProgress)
      ncclCheck(async, "ncclCommGetAsyncError (asynchronous error)", __FILE__, __LINE__);
  }
  touch(w);
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
    int32_t fields[3] = {r.rank, static_cast<int32_t>(::getpid()), r.device};
    std::memcpy(r.info.data(), fields, sizeof fields);
    char* text = reinterpret_cast<char*>(r.info.data());
    if (dev_)
      std::snprintf(text + kInfoBusOffset, kInfoHostOffset - kInfoBusOffset, "%s",
                    dev_->busId(r.device).c_str());
    std::snprintf(text + kInfoHostOffset, kInfoBytes - kInfoHostOffset, "%s", hostName().c_str());
  }
  const bool group = w.ranks.size() > 1;
  if (group) PERF_NCCL(ncclGroupStart());
  for (RankRes& r : w.ranks)
    PERF_NCCL(ncclAllGather(r.info.data(), r.infoAll.data(), kInfoBytes, ncclUint8, r.comm,
                            controlStream(r)));
  if (group) PERF_NCCL(ncclGroupEnd());
  complete(w);
  if (!w.prints) return;
  std::printf("# Using devices\n");
  const unsigned char* all = w.ranks.front().infoAll.data();
  for (int i = 0; i < nranks_; ++i) {
    const unsigned char* rec = all + static_cast<size_t>(i) * kInfoBytes;
    int32_t fields[3];
    std::memcpy(fields, rec, sizeof fields);
    char bus[kInfoHostOffset - kInfoBusOffset];
    std::memcpy(bus, rec + kInfoBusOffset, sizeof bus);
    bus[sizeof bus - 1] = '\0';
    char host[kInfoBytes - kInfoHostOffset];
    std::memcpy(host, rec + kInfoHostOffset, sizeof host);
    host[sizeof host - 1] = '\0';
    if (fields[2] < 0)
      std::printf("#  Rank %2d Group %2d Pid %6d on %10s cpu\n", fields[0], 0, fields[1], host);
    else
      std::printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d%s%s%s\n", fields[0], 0,
                  fields[1], host, fields[2], *bus ? " [" : "", bus, *bus ? "]" : "");
  }
  std::fflush(stdout);
  chooseRoofline(w);
}

void Driver::chooseRoofline(const Worker& w) {
  if (!dev_ || coll_.pattern() == Pattern::kNone) return;
  const RankRes& me = w.ranks.front();
  std::string source = "--hbm-gbs";
  double gbps = opt_.hbmGBps;
  if (gbps < 0) gbps = dev_->memoryGBps(me.device, &source);
  if (gbps <= 0) {
    std::printf("# Roofline: none (%s; --hbm-gbs sets the bandwidth)\n",
                opt_.hbmGBps == 0 ? "--hbm-gbs 0" : source.c_str());
    return;
  }
  // The ranks whose records name the same host and GPU (bus id, else ordinal) as this rank's.
  const unsigned char* all = me.infoAll.data();
  const unsigned char* mine = all + static_cast<size_t>(me.rank) * kInfoBytes;
  int32_t myDevice = 0;
  std::memcpy(&myDevice, mine + 2 * sizeof(int32_t), sizeof myDevice);
  const bool byBus = mine[kInfoBusOffset] != 0;
  ranksOnGpu_ = 0;
  for (int i = 0; i < nranks_; ++i) {
    const unsigned char* rec = all + static_cast<size_t>(i) * kInfoBytes;
    int32_t device = 0;
    std::memcpy(&device, rec + 2 * sizeof(int32_t), sizeof device);
    const bool sameHost = std::strncmp(reinterpret_cast<const char*>(rec + kInfoHostOffset),
                                       reinterpret_cast<const char*>(mine + kInfoHostOffset),
                                       kInfoBytes - kInfoHostOffset) == 0;
    const bool sameGpu = byBus ? std::strncmp(reinterpret_cast<const char*>(rec + kInfoBusOffset),
                                              reinterpret_cast<const char*>(mine + kInfoBusOffset),
                                              kInfoHostOffset - kInfoBusOffset) == 0
                               : device == myDevice;
    if (sameHost && sameGpu) ++ranksOnGpu_;
  }
  ranksOnGpu_ = std::max(ranksOnGpu_, 1);
  rooflineGBps_ = gbps;
  std::printf("# %s\n", rooflineLine(coll_.pattern(), nranks_, ranksOnGpu_, gbps, source).c_str());
  std::fflush(stdout);
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
  if (w.prints) printTableHeader(opt_.reportCpu != 0, roofline());

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

void Driver::chooseMemory() {
  if (opt_.hostMemory) {
    memoryLine_ = "Buffers in host memory (--host)";
    return;
  }
  std::string why;
  dev_ = DeviceRuntime::open(&why);
  if (!dev_) {
    memoryLine_ = "Buffers in host memory (" + why + ")";
    return;
  }
  memoryLine_ = "Buffers in device memory (cuMemAlloc), timed with CUDA events; CUDA driver " +
                std::to_string(dev_->driverVersion()) + ", " + std::to_string(dev_->deviceCount()) +
                " device(s)";
}

int Driver::run() {
  int libVersion = 0;
  PERF_NCCL(ncclGetVersion(&libVersion));
  const bool mainProcess = world_.index == 0;
  chooseMemory();
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

  // nccl-tests' device choice: NCCL_TESTS_DEVICE for the process's first rank, else one GPU
  // per rank of the host in order (modulo the device count here).
  const int perProcess = opt_.nThreads * opt_.nGpus;
  int firstDevice = localRankFromEnv(world_.index) * perProcess;
  if (const char* d = std::getenv("NCCL_TESTS_DEVICE"); d && *d) firstDevice = std::atoi(d);
  if (firstDevice < 0) firstDevice = 0;
  for (int t = 0; t < opt_.nThreads; ++t) {
    auto w = std::make_unique<Worker>();
    w->index = t;
    w->prints = mainProcess && t == 0;
    for (int g = 0; g < opt_.nGpus; ++g) {
      RankRes r;
      r.rank = (world_.index * opt_.nThreads + t) * opt_.nGpus + g;
      if (dev_) {
        r.device = dev_->ordinalFor(firstDevice, t * opt_.nGpus + g);
        dev_->retain(r.device);
      }
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

}  // namespace weft::perf
