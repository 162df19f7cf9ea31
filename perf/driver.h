// The driver behind perfMain (perf/perf_main.h): the ranks each thread drives, their buffers and
// the sweep over sizes, types, ops and roots. Internal to perf/: the run's lifecycle (ranks,
// threads, watchdog) is in perf/driver.cc, the sweep (calls, timing, data check) in
// perf/driver_sweep.cc, failure reporting in perf/failure.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "perf/common.h"
#include "perf/device.h"
#include "perf/failure.h"
#include "perf/options.h"
#include "perf/values.h"
#include "perf/world.h"

namespace weft::perf {

// One rank this thread drives.
struct RankRes {
  int rank = 0;
  int device = -1;  // the GPU's ordinal on device memory, -1 on host memory
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  char* sendAlloc = nullptr;  // device pointers on device memory
  char* recvAlloc = nullptr;
  // On device memory: host copies of the buffers, where the data check writes inputs and reads
  // results (copied over with cuMemcpyHtoD / cuMemcpyDtoH).
  std::vector<char> sendHost;
  std::vector<char> recvHost;
  DeviceRuntime::Event start = nullptr;  // CUDA events around the timed iterations
  DeviceRuntime::Event stop = nullptr;
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
  int currentDevice = -1;    // whose context is current on this thread (device memory)
  double rowUs[2] = {0, 0};  // the row's shown time per call, out of place and in place
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

class Driver {
 public:
  Driver(const Options& o, const ProcessWorld& world, const Collective& coll, const char* program)
      : opt_(o), world_(world), coll_(coll), program_(program) {
    nranks_ = world.count * o.nThreads * o.nGpus;
  }

  int run();

 private:
  // Device memory when the CUDA driver sees a GPU and --host is not given (dev_), else host.
  void chooseMemory();
  void printHeader(int libVersion) const;
  void initRanks(std::vector<RankRes*>& ranks);
  void setup(Worker& w);
  void teardown(Worker& w);
  void work(Worker& w);
  void deviceReport(Worker& w);
  // Device memory: the roofline's bandwidth and the ranks on the printing rank's GPU, from the
  // device report's records; prints the "# Roofline" line (perf/roofline.h).
  void chooseRoofline(const Worker& w);
  bool roofline() const { return rooflineGBps_ > 0; }
  void printRoofline(const Shape& s, const Worker& w) const;
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
  int64_t checkData(Worker& w, RankRes& r, const Shape& s, bool inPlace, const ValueModel& vm);
  // Device memory: makes r's GPU current on this thread (cudaSetDevice) when it is not.
  void bindDevice(Worker& w, const RankRes& r) const {
    if (dev_ && w.currentDevice != r.device) {
      dev_->use(r.device);
      w.currentDevice = r.device;
    }
  }
  // The stream of the tools' own control calls (barriers, time and error sums, the device
  // report) on host scratch: the rank's host stream, or on device memory the null stream (a
  // blocking call on host memory; a CUDA stream takes device memory only).
  cudaStream_t controlStream(const RankRes& r) const { return dev_ ? nullptr : r.stream; }
  // Where the data check reads and writes `p`, a pointer into r's receive buffer (inRecv) or
  // send buffer: p itself on host memory, the same offset in r's host copy on device memory.
  char* hostSide(RankRes& r, const char* p, bool inRecv) const;
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
  std::unique_ptr<DeviceRuntime> dev_;  // null: host memory
  std::string memoryLine_;              // the header's line on which memory the run uses
  double rooflineGBps_ = 0;             // > 0: the roofline columns are printed
  int ranksOnGpu_ = 1;                  // ranks sharing the printing rank's GPU
  std::atomic<bool> finished_{false};
};

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
    PERF_NCCL(ncclAllReduce(r.scratch, r.scratch, 1, type, op, r.comm, controlStream(r)));
  if (group) PERF_NCCL(ncclGroupEnd());
  complete(w);
  T out;
  std::memcpy(&out, w.ranks.front().scratch, sizeof out);
  return out;
}

}  // namespace weft::perf
