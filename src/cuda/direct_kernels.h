// Direct peer-memory collectives: for ranks whose buffers every rank's kernel can address (ranks
// of one process on one GPU, or on GPUs with peer access), each rank's blocks load and store the
// peers' user buffers themselves, with no FIFO and no proxy. Written once as WEFT_HD code: the
// CUDA kernel (weftDirect in interp_kernel.cu) runs it with kDirectThreads threads per block, and
// the host tests run the very same source on host threads (one per block, nthreads 1).
//
// Every call uses blocks [0, B) of every rank, B the same on every rank (src/cuda/direct_launch.h
// decides it from the call alone), and splits its elements among (rank, block) pairs the same way
// on every rank, so block b of a rank only ever meets block b of its peers:
//  - start: the block publishes its rank's input and output pointers in its mailbox slot with
//    the call's epoch (release), then acquires every peer's slot of the same block index at that
//    epoch and reads their pointers: a peer's kernel has started, so the work queued before it on
//    its stream (which wrote its input, or last read its output) is done;
//  - the block's share of the work, reading and writing peers' buffers directly;
//  - end: the block marks its slot done with the epoch (release) and waits until every peer's
//    block did the same, so that no rank's stream moves on (and rewrites its input or reads its
//    output) while a peer still reads or writes them.
// A slot's epoch is its own last value plus one: it lives in device memory, so consecutive calls
// and replays of a captured CUDA graph need no reset and no host-side rendezvous.
//
// Who touches what is chosen so that every element of every buffer is read and then written by
// one thread only, in place or not (see runDirectWork): the only exception, one-shot allreduce
// (each rank reads every input and writes its own output), runs as two-shot when any rank of the
// call is in place, which every rank sees alike once it has read its peers' pointers.
#pragma once
#include <cstdint>

#include "src/common/datatype.h"
#include "src/common/host_device.h"
#include "src/common/reduce_elements.h"
#include "src/cuda/direct_primitives.h"
#include "src/plan/plan.h"

namespace weft::cuda {
namespace direct {

// Elements per 16 bytes: the grain of every split, so that parts stay 16-byte aligned.
WEFT_HD_INLINE uint64_t unitOf(uint32_t elemSize) { return elemSize >= 16 ? 1 : 16 / elemSize; }

// One block's reduction: dst[q] + dstOff = OP over p of src[p] + srcOff, n elements.
struct ReduceJob {
  const char* const* src;
  char* const* dst;
  uint64_t srcOff;
  uint64_t dstOff;
  uint64_t n;
  uint32_t nsrc;
  uint32_t ndst;
};

// The reductions (allreduce, reduce-scatter, reduce) of rank r's block b. Rank r's share, with
// n ranks of B blocks each:
//  - allreduce one-shot: part b of B of all elements, from every input into r's output;
//  - allreduce two-shot: part rB+b of nB, from every input into every output;
//  - reduce-scatter: part b of B of r's result, from segment r of every input into r's output;
//  - reduce: part rB+b of nB, from every input into the root's output.
// Each element of an output is written by one thread, which read that element of every input
// first; in place, the only input element it overwrites is one only it reads.
WEFT_HD inline ReduceJob reduceJobOf(const DirectLaunch& p, uint32_t r, uint32_t b, bool oneShot,
                                     const DirectShared& sh) {
  const uint32_t n = static_cast<uint32_t>(p.nranks), B = p.blocks;
  const uint64_t es = elemSizeOf(p.type);
  const uint64_t unit = unitOf(static_cast<uint32_t>(es));
  ReduceJob j{sh.in, sh.out, 0, 0, 0, n, n};
  Range x{0, 0};
  switch (static_cast<plan::Collective>(p.coll)) {
    case plan::Collective::kAllReduce:
      x = oneShot ? part(0, p.count, unit, b, B) : part(0, p.count, unit, r * B + b, n * B);
      if (oneShot) j.dst = &sh.out[r], j.ndst = 1;
      j.srcOff = x.lo * es;
      break;
    case plan::Collective::kReduceScatter:
      x = part(0, p.count, unit, b, B);
      j.dst = &sh.out[r], j.ndst = 1;
      j.srcOff = (r * p.count + x.lo) * es;
      break;
    case plan::Collective::kReduce:
      x = part(0, p.count, unit, r * B + b, n * B);
      j.dst = &sh.out[p.root], j.ndst = 1;
      j.srcOff = x.lo * es;
      break;
    default:
      break;
  }
  j.dstOff = x.lo * es;
  j.n = x.hi - x.lo;
  return j;
}

template <class E, class Op, bool kScale, bool kDivide>
WEFT_HD_INLINE void reduceJob(const ReduceJob& j, typename E::Calc s, uint64_t divisor,
                              uint32_t tid, uint32_t nth) {
  reduceRange<E, Op, kScale, kDivide>(j.src, j.nsrc, j.srcOff, j.dst, j.ndst, j.dstOff, j.n, s,
                                      divisor, tid, nth);
}

template <class E>
WEFT_HD void reduceWork(const DirectLaunch& p, const ReduceJob& j, uint32_t tid, uint32_t nth) {
  using S = typename E::Storage;
  constexpr bool kInteger = std::is_integral_v<S> && std::is_same_v<typename E::Calc, S>;
  const typename E::Calc s = elements::scalarOf<E>(p.scalar);
  switch (static_cast<RedOp>(p.op)) {
    case RedOp::kProd:
      return reduceJob<E, elements::OpProd, false, false>(j, s, p.divisor, tid, nth);
    case RedOp::kMax:
      return reduceJob<E, elements::OpMax, false, false>(j, s, p.divisor, tid, nth);
    case RedOp::kMin:
      return reduceJob<E, elements::OpMin, false, false>(j, s, p.divisor, tid, nth);
    case RedOp::kPreMulSum:
      return reduceJob<E, elements::OpSum, true, false>(j, s, p.divisor, tid, nth);
    default:  // Sum (integer Avg: Sum, then the divide)
      if constexpr (kInteger) {
        if (p.divisor > 1)
          return reduceJob<E, elements::OpSum, false, true>(j, s, p.divisor, tid, nth);
      }
      return reduceJob<E, elements::OpSum, false, false>(j, s, p.divisor, tid, nth);
  }
}

// The copies (allgather, broadcast, alltoall) of rank r's block b:
//  - allgather: part b of B of r's input, into segment r of every output;
//  - broadcast: part rB+b of nB of the root's input, into every output;
//  - alltoall: for each peer p, half of the pair's two segments (r takes the first half where
//    r < p, the second where r > p), part b of B of it: segment r of p's input into segment p of
//    r's output and segment p of r's input into segment r of p's output, both read before either
//    is written (so in place they swap); and part b of B of r's own segment.
WEFT_HD inline void copyWork(const DirectLaunch& p, uint32_t r, uint32_t b, uint32_t tid,
                             uint32_t nth, DirectShared& sh) {
  const uint32_t n = static_cast<uint32_t>(p.nranks), B = p.blocks;
  const uint32_t es = elemSizeOf(p.type);
  const uint64_t unit = unitOf(es), seg = p.count * es;
  switch (static_cast<plan::Collective>(p.coll)) {
    case plan::Collective::kAllGather: {
      const Range x = part(0, p.count, unit, b, B);
      moveRange(sh.in[r] + x.lo * es, sh.out, n, r * seg + x.lo * es, nullptr, nullptr,
                (x.hi - x.lo) * es, es, tid, nth);
      break;
    }
    case plan::Collective::kBroadcast: {
      const Range x = part(0, p.count, unit, r * B + b, n * B);
      moveRange(sh.in[p.root] + x.lo * es, sh.out, n, x.lo * es, nullptr, nullptr,
                (x.hi - x.lo) * es, es, tid, nth);
      break;
    }
    case plan::Collective::kAlltoAll: {
      for (uint32_t q = 0; q < n; ++q) {
        if (q == r) {
          const Range x = part(0, p.count, unit, b, B);
          moveRange(sh.in[r] + r * seg + x.lo * es, &sh.out[r], 1, r * seg + x.lo * es, nullptr,
                    nullptr, (x.hi - x.lo) * es, es, tid, nth);
          continue;
        }
        const Range half = part(0, p.count, unit, r < q ? 0 : 1, 2);
        const Range x = part(half.lo, half.hi, unit, b, B);
        moveRange(sh.in[q] + r * seg + x.lo * es, &sh.out[r], 1, q * seg + x.lo * es,
                  sh.in[r] + q * seg + x.lo * es, sh.out[q] + r * seg + x.lo * es,
                  (x.hi - x.lo) * es, es, tid, nth);
      }
      break;
    }
    default:
      break;
  }
}

// Whether any rank's output is its input: one-shot allreduce then runs as two-shot.
WEFT_HD_INLINE bool anyInPlace(const DirectShared& sh, uint32_t n) {
  for (uint32_t q = 0; q < n; ++q)
    if (sh.in[q] == sh.out[q]) return true;
  return false;
}

WEFT_HD inline void runDirectWork(const DirectLaunch& p, uint32_t r, uint32_t b, uint32_t tid,
                                  uint32_t nth, DirectShared& sh) {
  using namespace elements;
  const plan::Collective c = static_cast<plan::Collective>(p.coll);
  if (c == plan::Collective::kAllGather || c == plan::Collective::kBroadcast ||
      c == plan::Collective::kAlltoAll)
    return copyWork(p, r, b, tid, nth, sh);
  const bool oneShot = p.algo == static_cast<uint8_t>(DirectAlgo::kOneShot) &&
                       !anyInPlace(sh, static_cast<uint32_t>(p.nranks));
  const ReduceJob j = reduceJobOf(p, r, b, oneShot, sh);
  switch (static_cast<DataType>(p.type)) {
    case DataType::kInt8:
      return reduceWork<IntElem<int8_t>>(p, j, tid, nth);
    case DataType::kUint8:
      return reduceWork<IntElem<uint8_t>>(p, j, tid, nth);
    case DataType::kInt32:
      return reduceWork<IntElem<int32_t>>(p, j, tid, nth);
    case DataType::kUint32:
      return reduceWork<IntElem<uint32_t>>(p, j, tid, nth);
    case DataType::kInt64:
      return reduceWork<IntElem<int64_t>>(p, j, tid, nth);
    case DataType::kUint64:
      return reduceWork<IntElem<uint64_t>>(p, j, tid, nth);
    case DataType::kFloat16:
      return reduceWork<HalfElem>(p, j, tid, nth);
    case DataType::kFloat32:
      return reduceWork<FloatElem<float>>(p, j, tid, nth);
    case DataType::kFloat64:
      return reduceWork<FloatElem<double>>(p, j, tid, nth);
    case DataType::kBfloat16:
      return reduceWork<Bf16Elem>(p, j, tid, nth);
    case DataType::kFp8E4M3:
      return reduceWork<E4m3Elem>(p, j, tid, nth);
    case DataType::kFp8E5M2:
      return reduceWork<E5m2Elem>(p, j, tid, nth);
  }
}

// One barrier's wait: thread q waits for rank q's block (threads stride over the ranks), reading
// its pointers at the start. False when a wait failed (recorded, abort raised).
WEFT_HD inline bool awaitPeers(const DirectLaunch& p, const DirectRankArgs& me, uint32_t b,
                               DirectPhase phase, uint32_t tid, uint32_t nth, DirectShared& sh) {
  const uint32_t n = static_cast<uint32_t>(p.nranks);
  for (uint32_t q = tid; q < n; q += nth) {
    if (q == static_cast<uint32_t>(me.rank)) continue;
    const DirectSlot* slot = &p.slots[q * p.slotsPerRank + b];
    const uint64_t* flag = phase == DirectPhase::kStart ? &slot->arrived : &slot->done;
    const DirectError e = waitFlag(p, flag, sh.epoch);
    if (e != DirectError::kNone) {
      fail(p, me.status, e, phase, b, static_cast<int32_t>(q), sh.epoch);
      sh.error = static_cast<uint32_t>(e);
    } else if (phase == DirectPhase::kStart) {
      // Read after the acquire: the pointers and shape of the call the flag names.
      sh.in[q] = reinterpret_cast<const char*>(static_cast<uintptr_t>(slot->input));
      sh.out[q] = reinterpret_cast<char*>(static_cast<uintptr_t>(slot->output));
      if (slot->count != p.count || slot->shape != callShape(p)) {
        fail(p, me.status, DirectError::kMismatch, phase, b, static_cast<int32_t>(q), sh.epoch);
        sh.error = static_cast<uint32_t>(DirectError::kMismatch);
      }
    }
  }
  blockSync();
  return sh.error == 0;
}

}  // namespace direct

// Block `block` of a direct launch, as thread `tid` of `nthreads` (a thread block on the GPU; on
// the host nthreads is 1): block b = block % blocks of rank rank[block / blocks].
WEFT_HD inline void runDirectBlock(const DirectLaunch& p, uint32_t block, uint32_t tid,
                                   uint32_t nthreads, DirectShared& sh) {
  const DirectRankArgs& me = p.rank[block / p.blocks];
  const uint32_t b = block % p.blocks, r = static_cast<uint32_t>(me.rank);
  const bool system = p.scope == static_cast<uint8_t>(DirectScope::kSystem);
  DirectSlot* mine = &p.slots[r * p.slotsPerRank + b];
  if (tid == 0) {
    const uint64_t epoch = direct::loadOwn(&mine->arrived) + 1;
    direct::storeOwn(&mine->input, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(me.input)));
    direct::storeOwn(&mine->output, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(me.output)));
    direct::storeOwn(&mine->count, p.count);
    direct::storeOwn(&mine->shape, direct::callShape(p));
    direct::storeRelease(&mine->arrived, epoch, system);
    sh.epoch = epoch;
    sh.error = 0;
    sh.in[r] = static_cast<const char*>(me.input);
    sh.out[r] = static_cast<char*>(me.output);
  }
  direct::blockSync();
  if (!direct::awaitPeers(p, me, b, DirectPhase::kStart, tid, nthreads, sh)) return;
  direct::runDirectWork(p, r, b, tid, nthreads, sh);
  direct::blockSync();
  if (tid == 0) direct::storeRelease(&mine->done, sh.epoch, system);
  direct::awaitPeers(p, me, b, DirectPhase::kEnd, tid, nthreads, sh);
}

}  // namespace weft::cuda
