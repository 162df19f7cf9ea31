#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "perf/driver.h"
#include "perf/report.h"

namespace weft::perf {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace

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
        bindDevice(w, r);
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
    char* sendPtr =
        inPlace ? recvBase + s.c.sendInPlaceOffset * ts * rank : r.sendAlloc + s.unalignBytes;
    char* recvHost = hostSide(r, recvBase, true);
    char* sendHost = hostSide(r, sendPtr, inPlace);
    std::memset(recvHost, 0, zeroElems * ts);
    DataView v = view(r, s, inPlace, &vm);
    for (size_t i = 0; i < s.c.send; ++i) {
      storeValue(s.type, sendHost, i, coll_.input(v, i));
      if ((i & 0xFFFFF) == 0xFFFFF) touch(w);
    }
    if (dev_) {
      // In place, the send region lies inside the receive region copied here.
      bindDevice(w, r);
      dev_->toDevice(recvBase, recvHost, zeroElems * ts);
      if (!inPlace) dev_->toDevice(sendPtr, sendHost, s.c.send * ts);
      touch(w);
    }
  }
}

int64_t Driver::checkData(Worker& w, RankRes& r, const Shape& s, bool inPlace,
                          const ValueModel& vm) {
  static const bool debug = std::getenv("WEFT_PERF_DEBUG") != nullptr;
  const size_t ts = s.typeSize;
  const char* recvBuffer = r.recvAlloc + s.unalignBytes +
                           (inPlace ? s.c.recvInPlaceOffset * ts * static_cast<size_t>(r.rank) : 0);
  char* recv = hostSide(r, recvBuffer, true);
  if (dev_) {
    bindDevice(w, r);
    dev_->toHost(recv, recvBuffer, s.c.recv * ts);
    touch(w);
  }
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
  if (dev_) {
    // On device memory the time is the streams' (CUDA events around the iterations), as
    // nccl-tests takes it: the slowest of this thread's ranks.
    for (RankRes& r : w.ranks) {
      bindDevice(w, r);
      dev_->record(r.start, r.stream);
    }
    bindDevice(w, r0);
  }
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
  if (dev_) {
    for (RankRes& r : w.ranks) {
      bindDevice(w, r);
      dev_->record(r.stop, r.stream);
    }
  }
  complete(w);
  double sec = seconds(start) / calls;
  if (dev_) {
    double ms = 0;
    for (RankRes& r : w.ranks) {
      bindDevice(w, r);
      ms = std::max(ms, dev_->elapsedMs(r.start, r.stop));
    }
    sec = ms / 1.0e3 / calls;
  }
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
  w.rowUs[inPlace ? 1 : 0] = shownSec * 1.0e6;
  w.bwSum += busBw;
  ++w.bwCount;
}

void Driver::printRoofline(const Shape& s, const Worker& w) const {
  double bound[2];
  for (int inPlace = 0; inPlace < 2; ++inPlace) {
    const Traffic t = directTraffic(coll_.pattern(), nranks_, inPlace != 0);
    bound[inPlace] = boundUs(t, static_cast<double>(s.totalBytes), ranksOnGpu_, rooflineGBps_);
  }
  printRooflineCells(bound[0], boundFraction(bound[0], w.rowUs[0]),
                     boundFraction(bound[1], w.rowUs[1]));
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
    if (w.prints && roofline()) printRoofline(s, w);
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

}  // namespace weft::perf
