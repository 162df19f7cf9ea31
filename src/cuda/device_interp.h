// The device interpreter: runs one rank's lowered Program (a DevicePlan, src/cuda/device_plan.h)
// with one thread block per lane, as MSCCL's interpreter does. Written once as WEFT_HD code: the
// CUDA kernel (interp_kernel.cu) runs it on the GPU, and the host tests run the very same
// source on host threads (one thread per lane, nthreads 1), over FIFOs in host memory.
//
// A lane runs its steps in order. Before a step, its block's thread 0 waits for the step's
// dependencies (each lane publishes how many of its steps are done in this run); a step that
// moves data goes a slice (one FIFO slot) at a time: thread 0 waits for the arriving slot and/or
// a free outgoing slot, all threads of the block copy or reduce the slice with the shared element
// arithmetic (src/common/reduce_elements.h), and thread 0 releases the slots. Every wait checks
// the rank's abort flag and a time budget; the first lane that fails records why in the rank's
// DeviceStatus and raises the abort flag, so that its other lanes stop too.
#pragma once
#include <cstdint>

#include "src/common/host_device.h"
#include "src/common/reduce_elements.h"
#include "src/cuda/device_fifo.h"
#include "src/cuda/device_plan.h"
#include "src/cuda/device_sync.h"
#include "src/plan/plan.h"

namespace weft::cuda {

enum class DeviceError : uint32_t {
  kNone = 0,
  kAborted = 1,   // the abort flag was raised (by the host or by another lane's failure)
  kTimeout = 2,   // a wait took longer than the run's time budget
  kMismatch = 3,  // a message's size differs from what the step expects: mismatched calls
  kBadArgs = 4,   // a FIFO slot smaller than the plan's slice, a missing FIFO or buffer
};

// What a failed lane was waiting for.
enum class DeviceWait : uint32_t { kNothing = 0, kDependency = 1, kSendSlot = 2, kReceive = 3 };

// Why a rank's run failed: written by the first lane that failed, in pinned host memory. The lane
// claims `lock` (from 0), writes the fields, then publishes `error` with a system-scope release;
// the host reads `error` with acquire and only then the fields.
struct DeviceStatus {
  uint32_t lock = 0;       // claimed by the first failing lane
  uint32_t error = 0;      // DeviceError, published last
  uint32_t waitingOn = 0;  // DeviceWait
  int32_t lane = -1;
  int32_t step = -1;           // index within the lane
  int32_t peer = -1;           // of the awaited link, or the lane awaited for a dependency
  uint32_t expectedBytes = 0;  // kMismatch: the slice the step expected, and what came
  uint32_t gotBytes = 0;
};

// Everything one rank's run needs, in memory its blocks can reach (device memory, or host memory
// for the host tests). Counters only grow: a rank reuses them run after run with a growing epoch.
struct DeviceRunArgs {
  const DevicePlan* plan = nullptr;
  char* buffers[kMaxDeviceBuffers] = {};  // by plan buffer id (Input, Output, Scratch, Extra+i)
  const DeviceFifo* sendFifos = nullptr;  // plan->sendLinks views, in the plan's link order
  const DeviceFifo* recvFifos = nullptr;  // plan->recvLinks views
  uint64_t* laneDone = nullptr;       // plan->lanes counters: epoch << 32 | steps done; zeroed once
  uint64_t* lanesFinished = nullptr;  // lanes finished over all runs; zeroed once
  // Lanes of this rank's earlier runs over these counters: the run's last lane to finish sees
  // lanesFinished reach lanesBefore + plan->lanes (runs of different plans differ in lanes).
  uint64_t lanesBefore = 0;
  // Where set, the run count lives in device memory instead (zeroed once): the run's epoch is
  // *runs + 1, and its last lane resets lanesFinished and counts the run, so that a launch
  // replayed from a CUDA graph (whose arguments are fixed) runs as the next epoch. Epoch and
  // lanesBefore are then unused.
  uint64_t* runs = nullptr;
  uint32_t epoch = 1;         // this run's number: 1, 2, ... (same on every lane)
  uint32_t* abort = nullptr;  // nonzero: stop waiting (host or a failing lane sets it)
  DeviceStatus* status = nullptr;
  uint64_t timeoutNs = 0;  // longest a single wait may take
  // The scope of the FIFOs' counters: kGpu where every rank of the run's plan is on this GPU,
  // kSystem where a peer is on another GPU. A rank's own counters are always kGpu; the abort and
  // status words always kSystem.
  sync::Scope fifoScope = sync::Scope::kSystem;
};

// What the threads of one block share (the kernel's __shared__ copy; a local on the host). No
// member initializers: a __shared__ variable cannot have a constructor; thread 0 writes every
// field before the block reads it.
struct LaneShared {
  char* in;        // the arriving slot of the current slice
  char* out;       // the outgoing slot
  uint32_t error;  // DeviceError of thread 0's waits: nonzero stops the block
  uint32_t last;   // 1: this lane finished the rank's run last
};

namespace interp {

WEFT_HD_INLINE void blockSync() {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#endif
}

template <class E>
WEFT_HD_INLINE typename E::Calc scalarOf(const Scalar& scalar) {
  typename E::Storage v{};
  auto* to = reinterpret_cast<unsigned char*>(&v);
  for (unsigned k = 0; k < sizeof v; ++k) to[k] = scalar.bytes[k];
  return E::toCalc(v);
}

// Records the first failure of the rank and stops its other lanes.
WEFT_HD_INLINE DeviceError fail(const DeviceRunArgs& a, DeviceError e, DeviceWait w, uint32_t lane,
                                uint32_t step, int32_t peer, uint32_t expected = 0,
                                uint32_t got = 0) {
  if (a.status && sync::claim(&a.status->lock, 1)) {
    a.status->waitingOn = static_cast<uint32_t>(w);
    a.status->lane = static_cast<int32_t>(lane);
    a.status->step = static_cast<int32_t>(step);
    a.status->peer = peer;
    a.status->expectedBytes = expected;
    a.status->gotBytes = got;
    sync::storeRelease32(&a.status->error, static_cast<uint32_t>(e));
  }
  if (a.abort) sync::raiseFlag(a.abort);
  return e;
}

// Waits until *counter >= target (written at `scope`): kNone, kAborted or kTimeout. The abort
// word is read every sync::kAbortPollRounds rounds.
WEFT_HD_INLINE DeviceError waitAtLeast(const DeviceRunArgs& a, const uint64_t* counter,
                                       uint64_t target, sync::Scope scope) {
  if (sync::loadAcquire(counter, scope) >= target) return DeviceError::kNone;
  const uint64_t start = sync::nowNs();
  for (uint32_t round = 0, polls = 0;;) {
    if (sync::loadAcquire(counter, scope) >= target) return DeviceError::kNone;
    if (a.abort && ++polls >= sync::kAbortPollRounds) {
      polls = 0;
      if (sync::loadFlag(a.abort)) return DeviceError::kAborted;
    }
    // The clock every kSpinRounds rounds while spinning, every round once backing off.
    if ((round % sync::kSpinRounds == sync::kSpinRounds - 1 || round >= sync::kYieldRounds) &&
        sync::nowNs() - start > a.timeoutNs)
      return DeviceError::kTimeout;
    sync::backoff(round);
    if (round < sync::kYieldRounds) ++round;
  }
}

// dst[j] = src[j] (times the scalar when kScaled), for this thread's share of [0, n).
template <class E, bool kScaled>
WEFT_HD_INLINE void copyShare(typename E::Storage* dst, const typename E::Storage* src, uint64_t n,
                              typename E::Calc scale, uint32_t tid, uint32_t nth) {
  for (uint64_t j = tid; j < n; j += nth) {
    if constexpr (kScaled)
      dst[j] = elements::scale<E>(src[j], scale);
    else
      dst[j] = src[j];
  }
}

// dst[j] = (and dst2[j] = when given) A(a[j]) op B(b[j]), for this thread's share of [0, n).
template <class E, class Op, bool kScaleA, bool kScaleB>
WEFT_HD_INLINE void reduceShare(typename E::Storage* dst, typename E::Storage* dst2,
                                const typename E::Storage* a, const typename E::Storage* b,
                                uint64_t n, typename E::Calc scale, uint32_t tid, uint32_t nth) {
  for (uint64_t j = tid; j < n; j += nth) {
    const typename E::Storage v =
        elements::combine<E, Op, kScaleA, kScaleB>(a[j], b[j], scale, scale);
    dst[j] = v;
    if (dst2) dst2[j] = v;
  }
}

// One slice (or a whole local step) of step `s`: elements [at, at + n) of its ranges, with `in`
// the arriving data and `out` the outgoing slot. Mirrors exec::Interpreter's step semantics.
template <class E, class Op>
WEFT_HD void moveShare(const DeviceRunArgs& a, const DeviceStep& s, uint64_t at, uint64_t n,
                       const char* inBytes, char* outBytes, typename E::Calc scale, uint32_t tid,
                       uint32_t nth) {
  using S = typename E::Storage;
  S* dst = reinterpret_cast<S*>(a.buffers[s.dstBuffer]) + s.dstOffset + at;
  const S* src = reinterpret_cast<const S*>(a.buffers[s.srcBuffer]) + s.srcOffset + at;
  const S* in = reinterpret_cast<const S*>(inBytes);
  S* out = reinterpret_cast<S*>(outBytes);
  const bool scaled = s.scaled != 0;
  switch (static_cast<plan::Op>(s.op)) {
    case plan::Op::kSend:
      if (scaled)
        copyShare<E, true>(out, src, n, scale, tid, nth);
      else
        copyShare<E, false>(out, src, n, scale, tid, nth);
      break;
    case plan::Op::kCopy:
      if (scaled)
        copyShare<E, true>(dst, src, n, scale, tid, nth);
      else if (dst != src)  // a copy onto itself (in place) writes nothing
        copyShare<E, false>(dst, src, n, scale, tid, nth);
      break;
    case plan::Op::kRecv:
      copyShare<E, false>(dst, in, n, scale, tid, nth);
      break;
    case plan::Op::kRecvCopySend:
      copyShare<E, false>(dst, in, n, scale, tid, nth);
      copyShare<E, false>(out, in, n, scale, tid, nth);
      break;
    case plan::Op::kRecvReduce:
      reduceShare<E, Op, false, false>(dst, nullptr, dst, in, n, scale, tid, nth);
      break;
    case plan::Op::kRecvReduceSend:
    case plan::Op::kRecvReduceCopy:
    case plan::Op::kRecvReduceCopySend: {
      const bool sends = s.op != static_cast<uint8_t>(plan::Op::kRecvReduceCopy);
      const bool keeps = s.op != static_cast<uint8_t>(plan::Op::kRecvReduceSend);
      S* first = keeps ? dst : out;
      S* second = keeps && sends ? out : nullptr;
      if (scaled)
        reduceShare<E, Op, true, false>(first, second, src, in, n, scale, tid, nth);
      else
        reduceShare<E, Op, false, false>(first, second, src, in, n, scale, tid, nth);
      break;
    }
    case plan::Op::kReduce:
      if (scaled)
        reduceShare<E, Op, false, true>(dst, nullptr, dst, src, n, scale, tid, nth);
      else
        reduceShare<E, Op, false, false>(dst, nullptr, dst, src, n, scale, tid, nth);
      break;
    case plan::Op::kNop:
      break;
  }
}

// plan::opSends / opRecvs for device code (plan.h's are host functions).
WEFT_HD_INLINE bool opSends(uint8_t op) {
  switch (static_cast<plan::Op>(op)) {
    case plan::Op::kSend:
    case plan::Op::kRecvCopySend:
    case plan::Op::kRecvReduceSend:
    case plan::Op::kRecvReduceCopySend:
      return true;
    default:
      return false;
  }
}
WEFT_HD_INLINE bool opRecvs(uint8_t op) {
  switch (static_cast<plan::Op>(op)) {
    case plan::Op::kRecv:
    case plan::Op::kRecvReduce:
    case plan::Op::kRecvCopySend:
    case plan::Op::kRecvReduceSend:
    case plan::Op::kRecvReduceCopy:
    case plan::Op::kRecvReduceCopySend:
      return true;
    default:
      return false;
  }
}

// A step that sends and/or receives, slice by slice through its FIFOs. Zero-count steps still
// exchange one empty message, as the host interpreter's do.
template <class E, class Op>
WEFT_HD DeviceError transferStep(const DeviceRunArgs& a, const DeviceStep& s, uint32_t lane,
                                 uint32_t index, typename E::Calc scale, uint32_t tid, uint32_t nth,
                                 LaneShared& sh) {
  const DevicePlan* p = a.plan;
  const bool sends = s.sendLink >= 0, recvs = s.recvLink >= 0;
  const DeviceFifo* send = sends && a.sendFifos ? &a.sendFifos[s.sendLink] : nullptr;
  const DeviceFifo* recv = recvs && a.recvFifos ? &a.recvFifos[s.recvLink] : nullptr;
  const int32_t sendPeer = sends ? sendLinksOf(p)[s.sendLink].peer : -1;
  const int32_t recvPeer = recvs ? recvLinksOf(p)[s.recvLink].peer : -1;
  const uint64_t sliceBytes = p->sliceElems * p->elemSize;
  // Only thread 0 touches the counters; it reads where this lane left them.
  uint64_t sent = 0, taken = 0;
  DeviceError err = DeviceError::kNone;
  if (tid == 0) {
    const bool sendBad = sends && (!send || !send->posted || send->slotBytes < sliceBytes);
    const bool recvBad = recvs && (!recv || !recv->posted || recv->slotBytes < sliceBytes);
    if (sendBad || recvBad)
      err = fail(a, DeviceError::kBadArgs, DeviceWait::kNothing, lane, index,
                 sendBad ? sendPeer : recvPeer);
    if (send && !sendBad) sent = sync::loadRelaxed(send->posted);
    if (recv && !recvBad) taken = sync::loadRelaxed(recv->consumed);
    sh.error = static_cast<uint32_t>(err);
  }
  blockSync();
  if (sh.error) return static_cast<DeviceError>(sh.error);
  uint64_t done = 0;
  do {
    const uint64_t n = s.count - done < p->sliceElems ? s.count - done : p->sliceElems;
    const uint32_t bytes = static_cast<uint32_t>(n * p->elemSize);
    if (tid == 0) {
      if (recv) {
        err = waitAtLeast(a, recv->posted, taken + 1, a.fifoScope);
        if (err != DeviceError::kNone) {
          fail(a, err, DeviceWait::kReceive, lane, index, recvPeer);
        } else {
          const uint32_t got = recv->sizes[taken % recv->slotCount];
          if (got != bytes)
            err = fail(a, DeviceError::kMismatch, DeviceWait::kReceive, lane, index, recvPeer,
                       bytes, got);
          sh.in = fifoSlot(*recv, taken);
        }
      }
      if (send && err == DeviceError::kNone) {
        // A slot is free once the receiver released the message slotCount before this one.
        const uint64_t need = sent + 1 > send->slotCount ? sent + 1 - send->slotCount : 0;
        err = waitAtLeast(a, send->consumed, need, a.fifoScope);
        if (err != DeviceError::kNone) fail(a, err, DeviceWait::kSendSlot, lane, index, sendPeer);
        sh.out = fifoSlot(*send, sent);
      }
      sh.error = static_cast<uint32_t>(err);
    }
    blockSync();
    if (sh.error) return static_cast<DeviceError>(sh.error);
    moveShare<E, Op>(a, s, done, n, sh.in, sh.out, scale, tid, nth);
    blockSync();
    if (tid == 0) {
      if (send) {
        send->sizes[sent % send->slotCount] = bytes;
        sync::storeRelease(send->posted, ++sent, a.fifoScope);
      }
      if (recv) sync::storeRelease(recv->consumed, ++taken, a.fifoScope);
    }
    done += n;
  } while (done < s.count);
  return DeviceError::kNone;
}

// Integer Avg: Output[0, count) /= divisor, this thread's share (elements::divide, the rule
// weft::divideElements applies on the host).
template <class E>
WEFT_HD void divideShare(char* buf, uint64_t count, uint64_t divisor, uint32_t tid, uint32_t nth) {
  using S = typename E::Storage;
  S* v = reinterpret_cast<S*>(buf);
  for (uint64_t j = tid; j < count; j += nth) v[j] = elements::divide<E>(v[j], divisor);
}

template <class E, class Op>
WEFT_HD DeviceError runLaneTyped(const DeviceRunArgs& a, uint32_t lane, uint32_t tid, uint32_t nth,
                                 LaneShared& sh) {
  const DevicePlan* p = a.plan;
  const typename E::Calc scale = scalarOf<E>(p->scalar);
  const uint32_t first = laneFirst(p)[lane], end = laneFirst(p)[lane + 1];
  // Read before this lane finishes, so before the run's last lane counts the run.
  const uint32_t epoch =
      a.runs ? static_cast<uint32_t>(sync::loadAcquire(a.runs, sync::Scope::kGpu) + 1) : a.epoch;
  const uint64_t epochBase = uint64_t{epoch} << 32;
  for (uint32_t i = first; i < end; ++i) {
    const DeviceStep& s = stepsOf(p)[i];
    const uint32_t index = i - first;
    if (tid == 0) {
      DeviceError err = DeviceError::kNone;
      for (uint32_t k = 0; k < s.depCount && err == DeviceError::kNone; ++k) {
        const DeviceDep d = depsOf(p)[s.depFirst + k];
        err = waitAtLeast(a, &a.laneDone[d.lane], epochBase | (d.step + 1), sync::Scope::kGpu);
        if (err != DeviceError::kNone)
          fail(a, err, DeviceWait::kDependency, lane, index, static_cast<int32_t>(d.lane));
      }
      sh.error = static_cast<uint32_t>(err);
    }
    blockSync();
    if (sh.error) return static_cast<DeviceError>(sh.error);
    if (opSends(s.op) || opRecvs(s.op)) {
      const DeviceError err = transferStep<E, Op>(a, s, lane, index, scale, tid, nth, sh);
      if (err != DeviceError::kNone) return err;
    } else {
      moveShare<E, Op>(a, s, 0, s.count, nullptr, nullptr, scale, tid, nth);
    }
    blockSync();
    if (tid == 0) sync::storeRelease(&a.laneDone[lane], epochBase | (index + 1), sync::Scope::kGpu);
  }
  // The rank's last lane to finish divides an integer Avg's result.
  if (tid == 0) {
    const uint64_t before = sync::fetchAddAcqRel(a.lanesFinished, sync::Scope::kGpu);
    sh.last = before + 1 == (a.runs ? 0 : a.lanesBefore) + p->lanes;
  }
  blockSync();
  if (sh.last && p->divisor > 1) divideShare<E>(a.buffers[1], p->divideCount, p->divisor, tid, nth);
  if (sh.last && a.runs && tid == 0) {
    sync::storeRelease(a.lanesFinished, 0, sync::Scope::kGpu);
    sync::storeRelease(a.runs, epoch, sync::Scope::kGpu);
  }
  return DeviceError::kNone;
}

template <class E>
WEFT_HD DeviceError runLaneWithOp(const DeviceRunArgs& a, uint32_t lane, uint32_t tid, uint32_t nth,
                                  LaneShared& sh) {
  // The plan's operator was lowered on the host (exec::lowerOperator): never Avg here.
  return elements::withOp(static_cast<RedOp>(a.plan->op), [&](auto op) {
    return runLaneTyped<E, decltype(op)>(a, lane, tid, nth, sh);
  });
}

}  // namespace interp

// Runs lane `lane` of the rank described by `a`, as thread `tid` of `nthreads` cooperating
// threads (a thread block on the GPU; on the host nthreads must be 1). Returns kNone, or the
// error this lane met (the rank's first error is in a.status).
WEFT_HD inline DeviceError runLane(const DeviceRunArgs& a, uint32_t lane, uint32_t tid,
                                   uint32_t nthreads, LaneShared& sh) {
  using namespace elements;
  switch (static_cast<DataType>(a.plan->type)) {
    case DataType::kInt8:
      return interp::runLaneWithOp<IntElem<int8_t>>(a, lane, tid, nthreads, sh);
    case DataType::kUint8:
      return interp::runLaneWithOp<IntElem<uint8_t>>(a, lane, tid, nthreads, sh);
    case DataType::kInt32:
      return interp::runLaneWithOp<IntElem<int32_t>>(a, lane, tid, nthreads, sh);
    case DataType::kUint32:
      return interp::runLaneWithOp<IntElem<uint32_t>>(a, lane, tid, nthreads, sh);
    case DataType::kInt64:
      return interp::runLaneWithOp<IntElem<int64_t>>(a, lane, tid, nthreads, sh);
    case DataType::kUint64:
      return interp::runLaneWithOp<IntElem<uint64_t>>(a, lane, tid, nthreads, sh);
    case DataType::kFloat16:
      return interp::runLaneWithOp<HalfElem>(a, lane, tid, nthreads, sh);
    case DataType::kFloat32:
      return interp::runLaneWithOp<FloatElem<float>>(a, lane, tid, nthreads, sh);
    case DataType::kFloat64:
      return interp::runLaneWithOp<FloatElem<double>>(a, lane, tid, nthreads, sh);
    case DataType::kBfloat16:
      return interp::runLaneWithOp<Bf16Elem>(a, lane, tid, nthreads, sh);
    case DataType::kFp8E4M3:
      return interp::runLaneWithOp<E4m3Elem>(a, lane, tid, nthreads, sh);
    case DataType::kFp8E5M2:
      return interp::runLaneWithOp<E5m2Elem>(a, lane, tid, nthreads, sh);
  }
  if (tid == 0) interp::fail(a, DeviceError::kBadArgs, DeviceWait::kNothing, lane, 0, -1);
  return DeviceError::kBadArgs;
}

}  // namespace weft::cuda
