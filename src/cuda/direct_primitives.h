// The parts of the direct peer-memory collectives (src/cuda/direct_kernels.h): the kernel's
// parameter, mailbox slots and status, the barrier flags and waits, and the copy and reduce loops.
#pragma once
#include <cstdint>
#include <type_traits>

#include "src/common/datatype.h"
#include "src/common/host_device.h"
#include "src/common/reduce_elements.h"
#include "src/cuda/device_sync.h"
#include "src/plan/plan.h"

namespace weft::cuda {

inline constexpr uint32_t kMaxDirectRanks = 16;       // ranks of a communicator on this path
inline constexpr uint32_t kMaxDirectLaunchRanks = 8;  // ranks one launch carries
inline constexpr uint32_t kDirectThreads = 512;       // threads per block (__launch_bounds__)
inline constexpr uint32_t kDirectUnroll = 4;          // 16-byte words per thread per iteration
// Spins of a wait between two reads of the abort word and the clock (the abort word may be
// host memory, a read of which crosses PCIe).
inline constexpr uint32_t kDirectPollRounds = 256;
// The kernel's symbol in the image (extern "C": no mangling).
inline constexpr const char* kDirectKernelName = "weftDirect";

// How an allreduce splits its work. One-shot: every rank reduces all elements from every input
// into its own output (least latency: one remote read per element and no remote write). Two-shot:
// rank r reduces its 1/n of the elements from every input and stores the result into every
// output (each element reduced once). The other collectives have one form each.
enum class DirectAlgo : uint8_t { kOneShot = 0, kTwoShot = 1 };

// The memory scope of the barriers' flags: GPU when every rank of the call runs on this GPU,
// system when peers run on other GPUs.
enum class DirectScope : uint8_t { kGpu = 0, kSystem = 1 };

enum class DirectError : uint32_t {
  kNone = 0,
  kAborted = 1,   // the abort word was raised (by the host or by a failing block)
  kTimeout = 2,   // a peer's block did not arrive (or finish) within the time budget
  kMismatch = 3,  // a peer's call differs (collective, count, type, operator, root or blocks)
};

// Which barrier a failed block waited in.
enum class DirectPhase : uint32_t { kNone = 0, kStart = 1, kEnd = 2 };

// One (rank, block) mailbox slot in device memory, zeroed once when the world is set up. Only its
// own block writes it; peers' blocks of the same index read it.
struct alignas(64) DirectSlot {
  uint64_t arrived;  // the last call (epoch) this block started; input / output are that call's
  uint64_t done;     // the last call in which it finished with its peers' buffers
  uint64_t input;    // its rank's input and output pointers
  uint64_t output;
  uint64_t count;  // the call's count and shape (callShape): peers' must equal the block's own
  uint64_t shape;
};

// Why a rank's call failed, written by its first block that failed: the block claims the report,
// writes the fields, then publishes `error` (release), so a reader that sees an error (acquire)
// sees its fields. Zeroed once; the communicator is unusable after an error.
struct DirectStatus {
  uint32_t claimed;
  uint32_t error;  // DirectError
  uint32_t phase;  // DirectPhase
  int32_t block;
  int32_t peer;  // the rank whose block it waited for
  uint32_t pad;
  uint64_t epoch;
};

// One rank of a launch.
struct DirectRankArgs {
  const void* input;
  void* output;
  DirectStatus* status;
  int32_t rank;
  uint32_t pad;
};

// The kernel's one parameter, passed by value and read in place (const __grid_constant__): kept
// small, with the mailboxes and statuses behind pointers. Blocks [k * blocks, (k + 1) * blocks)
// run rank `rank[k]`; the grid has ranks * blocks blocks.
struct DirectLaunch {
  DirectSlot* slots;   // the world's mailboxes: slots[rank * slotsPerRank + block]
  uint32_t* abort;     // nonzero: stop waiting; a failing block raises it (may be null)
  uint64_t count;      // elements, as the NCCL call counts them (per rank)
  uint64_t timeoutNs;  // longest a single barrier wait may take
  uint64_t divisor;    // integer Avg: results divided by it (0 or 1: none)
  Scalar scalar;       // PreMulSum's factor, applied to every input read
  uint32_t slotsPerRank;
  uint32_t blocks;  // B, blocks per rank: the same on every rank of the call
  int32_t nranks;
  int32_t root;  // broadcast and reduce
  uint8_t
      coll;  // plan::Collective: AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll
  uint8_t type;   // DataType
  uint8_t op;     // RedOp after lowering: Sum, Prod, Max, Min or PreMulSum (never Avg)
  uint8_t algo;   // DirectAlgo (allreduce)
  uint8_t scope;  // DirectScope
  uint8_t ranks;  // ranks in this launch
  DirectRankArgs rank[kMaxDirectLaunchRanks];
};
static_assert(sizeof(DirectLaunch) <= 512, "the direct kernel's parameter stays small");

// What the threads of one block share (the kernel's __shared__ copy; a local on the host). No
// member initializers: a __shared__ variable cannot have a constructor.
struct DirectShared {
  const char* in[kMaxDirectRanks];  // every rank's input and output, from the mailboxes
  char* out[kMaxDirectRanks];
  uint64_t epoch;
  uint32_t error;  // nonzero: a wait of this block failed
};

// Whether the direct kernels run `coll` (allreduce, broadcast, reduce, allgather,
// reduce-scatter, alltoall) for `nranks` ranks.
inline bool directSupports(plan::Collective coll, int nranks) {
  if (nranks < 1 || nranks > static_cast<int>(kMaxDirectRanks)) return false;
  switch (coll) {
    case plan::Collective::kAllReduce:
    case plan::Collective::kBroadcast:
    case plan::Collective::kReduce:
    case plan::Collective::kAllGather:
    case plan::Collective::kReduceScatter:
    case plan::Collective::kAlltoAll:
      return true;
    default:
      return false;
  }
}

// Whether `p` is a launch the kernel can run (DirectKernel::launch's checks; the tests' fake
// driver checks the same).
inline bool directLaunchValid(const DirectLaunch& p) {
  if (p.ranks == 0 || p.ranks > kMaxDirectLaunchRanks) return false;
  if (!directSupports(static_cast<plan::Collective>(p.coll), p.nranks)) return false;
  if (!p.slots || p.blocks == 0 || p.blocks > p.slotsPerRank) return false;
  if (dataTypeSize(static_cast<DataType>(p.type)) == 0 || p.type >= kNumDataTypes) return false;
  const RedOp op = static_cast<RedOp>(p.op);
  if (op == RedOp::kAvg || p.op > static_cast<uint8_t>(RedOp::kPreMulSum)) return false;
  if (p.algo > static_cast<uint8_t>(DirectAlgo::kTwoShot)) return false;
  if (p.scope > static_cast<uint8_t>(DirectScope::kSystem)) return false;
  const plan::Collective c = static_cast<plan::Collective>(p.coll);
  if ((c == plan::Collective::kBroadcast || c == plan::Collective::kReduce) &&
      (p.root < 0 || p.root >= p.nranks))
    return false;
  for (uint32_t k = 0; k < p.ranks; ++k)
    if (p.rank[k].rank < 0 || p.rank[k].rank >= p.nranks) return false;
  return true;
}

namespace direct {

// Unrolls the next loop in device code (a loop of constant trip count over registers).
#if defined(__CUDACC__)
#define WEFT_UNROLL _Pragma("unroll")
#else
#define WEFT_UNROLL
#endif

// Keeps a loop a function of its own in device code: one per (type, operator) instead of all of
// them inlined into one kernel body, which the assembler would take very long to compile.
#if defined(__CUDACC__)
#define WEFT_NOINLINE __noinline__
#else
#define WEFT_NOINLINE
#endif

WEFT_HD_INLINE void blockSync() {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#endif
}

// Flag loads and stores at the barrier's scope. A store follows the block's barrier, so it
// releases what every thread of the block wrote before (release is cumulative).
WEFT_HD_INLINE uint64_t loadAcquire(const uint64_t* p, bool system) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  if (system)
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  (void)system;
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

WEFT_HD_INLINE void storeRelease(uint64_t* p, uint64_t v, bool system) {
#if defined(__CUDA_ARCH__)
  if (system)
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  (void)system;
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

// A word of the block's own slot, last written by an earlier kernel: no ordering needed.
WEFT_HD_INLINE uint64_t loadOwn(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const volatile uint64_t*>(p);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

WEFT_HD_INLINE void storeOwn(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<volatile uint64_t*>(p) = v;
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

// Records the rank's first failure (fields first, then the error, published) and raises the
// abort word so that every block waiting on it stops.
WEFT_HD_INLINE void fail(const DirectLaunch& p, DirectStatus* st, DirectError e, DirectPhase ph,
                         uint32_t block, int32_t peer, uint64_t epoch) {
  if (st && sync::claim(&st->claimed, 1u)) {
    st->phase = static_cast<uint32_t>(ph);
    st->block = static_cast<int32_t>(block);
    st->peer = peer;
    st->epoch = epoch;
#if defined(__CUDA_ARCH__)
    __threadfence_system();
    *reinterpret_cast<volatile uint32_t*>(&st->error) = static_cast<uint32_t>(e);
#else
    __atomic_store_n(&st->error, static_cast<uint32_t>(e), __ATOMIC_RELEASE);
#endif
  }
  if (p.abort) sync::raiseFlag(p.abort);
}

// Waits until *flag >= target. The abort word and the clock are read every kDirectPollRounds
// rounds only.
WEFT_HD_INLINE DirectError waitFlag(const DirectLaunch& p, const uint64_t* flag, uint64_t target) {
  const bool system = p.scope == static_cast<uint8_t>(DirectScope::kSystem);
  uint64_t start = 0;
  for (uint32_t round = 0;; ++round) {
    if (loadAcquire(flag, system) >= target) return DirectError::kNone;
    if (round % kDirectPollRounds == kDirectPollRounds - 1) {
      if (p.abort && sync::loadFlag(p.abort)) return DirectError::kAborted;
      const uint64_t now = sync::nowNs();
      if (start == 0)
        start = now;
      else if (now - start > p.timeoutNs)
        return DirectError::kTimeout;
    }
    sync::backoff(round < sync::kYieldRounds ? round : sync::kYieldRounds);
  }
}

// Bytes per element of a DataType, for device code (dataTypeSize is a host function).
WEFT_HD_INLINE uint32_t elemSizeOf(uint8_t type) {
  switch (static_cast<DataType>(type)) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2:
      return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

// What every rank's call must agree on besides the count, as one word.
WEFT_HD_INLINE uint64_t callShape(const DirectLaunch& p) {
  return uint64_t{p.coll} | uint64_t{p.type} << 8 | uint64_t{p.op} << 16 |
         (static_cast<uint64_t>(static_cast<uint32_t>(p.root)) & 0xffff) << 24 |
         uint64_t{p.blocks} << 40;
}

// Elements [lo, hi) cut into k parts of whole `unit`s (16 bytes of elements, so that every part
// but the last starts and ends 16-byte aligned where lo is); part i.
struct Range {
  uint64_t lo;
  uint64_t hi;
};
WEFT_HD_INLINE Range part(uint64_t lo, uint64_t hi, uint64_t unit, uint64_t i, uint64_t k) {
  const uint64_t units = (hi - lo + unit - 1) / unit;
  const uint64_t base = units / k, extra = units % k;
  const uint64_t a = i * base + (i < extra ? i : extra);
  const uint64_t b = a + base + (i < extra ? 1 : 0);
  const uint64_t x = lo + a * unit, y = lo + b * unit;
  return {x < hi ? x : hi, y < hi ? y : hi};
}

// 16 bytes, moved by one load or store (LDG.E.128 / STG.E.128 on the GPU).
#if defined(__CUDACC__)
using Word16 = uint4;
#else
struct alignas(16) Word16 {
  uint32_t x, y, z, w;
};
#endif

// Loads and stores of the copy and reduce loops. On the GPU, 16-byte words go through global
// memory accesses (LDG.E.128 / STG.E.128): the pointers come from shared memory, where the
// compiler cannot tell their address space and would emit generic ones.
template <class T>
WEFT_HD_INLINE T loadWord(const T* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, Word16>) {
    Word16 v;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  }
#endif
  return *p;
}

template <class T>
WEFT_HD_INLINE void storeWord(T* p, const T& v) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, Word16>) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w)
                 : "memory");
    return;
  }
#endif
  *p = v;
}

WEFT_HD_INLINE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <class E>
union Pack {
  Word16 word;
  typename E::Storage e[16 / sizeof(typename E::Storage)];
};

// Element types whose conversions are long (software fp8 and fp16 rounding): their element
// operations stay calls in device code, so that a 16-element word does not inline sixteen
// copies of them (the assembler would take very long over the kernel).
template <class E>
inline constexpr bool kLongConversions =
    !std::is_same_v<typename E::Storage, typename E::Calc> &&
    (sizeof(typename E::Storage) == 1 || std::is_same_v<E, elements::HalfElem>);

template <class E, class Op, bool kScale>
WEFT_HD WEFT_NOINLINE typename E::Storage combineCall(typename E::Storage a, typename E::Storage b,
                                                      typename E::Calc s) {
  return elements::combine<E, Op, false, kScale>(a, b, s, s);
}
template <class E>
WEFT_HD WEFT_NOINLINE typename E::Storage scaleCall(typename E::Storage a, typename E::Calc s) {
  return elements::scale<E>(a, s);
}

template <class E, class Op, bool kScale>
WEFT_HD_INLINE typename E::Storage combineOne(typename E::Storage a, typename E::Storage b,
                                              typename E::Calc s) {
  if constexpr (kLongConversions<E>)
    return combineCall<E, Op, kScale>(a, b, s);
  else
    return elements::combine<E, Op, false, kScale>(a, b, s, s);
}
template <class E>
WEFT_HD_INLINE typename E::Storage scaleOne(typename E::Storage a, typename E::Calc s) {
  if constexpr (kLongConversions<E>)
    return scaleCall<E>(a, s);
  else
    return elements::scale<E>(a, s);
}

// acc = scale(x) (when kScale) or x: the first operand of a reduction.
template <class E, bool kScale>
WEFT_HD_INLINE void first(Pack<E>& acc, typename E::Calc s) {
  if constexpr (kScale) {
    WEFT_UNROLL
    for (unsigned j = 0; j < sizeof acc.e / sizeof acc.e[0]; ++j)
      acc.e[j] = scaleOne<E>(acc.e[j], s);
  }
}

template <class E, class Op, bool kScale>
WEFT_HD_INLINE void combine(Pack<E>& acc, const Pack<E>& x, typename E::Calc s) {
  WEFT_UNROLL
  for (unsigned j = 0; j < sizeof acc.e / sizeof acc.e[0]; ++j)
    acc.e[j] = combineOne<E, Op, kScale>(acc.e[j], x.e[j], s);
}

template <class E, bool kDivide>
WEFT_HD_INLINE void finish(Pack<E>& acc, uint64_t divisor) {
  if constexpr (kDivide) {
    WEFT_UNROLL
    for (unsigned j = 0; j < sizeof acc.e / sizeof acc.e[0]; ++j)
      acc.e[j] = elements::divide<E>(acc.e[j], divisor);
  }
}

// dst[q] + dstOff = OP over p of src[p] + srcOff, for n elements (offsets in bytes), this
// thread's share: 16-byte words, kDirectUnroll at a time, where every pointer is 16-byte aligned,
// element by element otherwise and for the tail. Every rank reduces in rank order, so results
// agree bit for bit wherever they are computed.
template <class E, class Op, bool kScale, bool kDivide>
WEFT_HD WEFT_NOINLINE void reduceRange(const char* const* src, uint32_t nsrc, uint64_t srcOff,
                                       char* const* dst, uint32_t ndst, uint64_t dstOff, uint64_t n,
                                       typename E::Calc s, uint64_t divisor, uint32_t tid,
                                       uint32_t nth) {
  using S = typename E::Storage;
  constexpr uint64_t kPer = 16 / sizeof(S);
  // Narrow elements make a word many conversions: fewer words in flight keep the code small.
  constexpr uint32_t kUnroll = sizeof(S) >= 4 ? kDirectUnroll : (sizeof(S) == 2 ? 2 : 1);
  bool vec = true;
  for (uint32_t p = 0; p < nsrc; ++p) vec = vec && aligned16(src[p] + srcOff);
  for (uint32_t q = 0; q < ndst; ++q) vec = vec && aligned16(dst[q] + dstOff);
  uint64_t scalarFrom = 0;
  if (vec) {
    const uint64_t words = n / kPer;
    uint64_t w = tid;
    for (; w + (kUnroll - 1) * nth < words; w += kUnroll * nth) {
      Pack<E> acc[kUnroll];
      WEFT_UNROLL
      for (uint32_t k = 0; k < kUnroll; ++k) {
        acc[k].word = loadWord(reinterpret_cast<const Word16*>(src[0] + srcOff) + w + k * nth);
        first<E, kScale>(acc[k], s);
      }
      for (uint32_t p = 1; p < nsrc; ++p) {
        Pack<E> x[kUnroll];
        WEFT_UNROLL
        for (uint32_t k = 0; k < kUnroll; ++k)
          x[k].word = loadWord(reinterpret_cast<const Word16*>(src[p] + srcOff) + w + k * nth);
        WEFT_UNROLL
        for (uint32_t k = 0; k < kUnroll; ++k) combine<E, Op, kScale>(acc[k], x[k], s);
      }
      WEFT_UNROLL
      for (uint32_t k = 0; k < kUnroll; ++k) finish<E, kDivide>(acc[k], divisor);
      for (uint32_t q = 0; q < ndst; ++q) WEFT_UNROLL
      for (uint32_t k = 0; k < kUnroll; ++k)
        storeWord(reinterpret_cast<Word16*>(dst[q] + dstOff) + w + k * nth, acc[k].word);
    }
    // The words left over from whole rounds (none where a round is one word).
    for (; kUnroll > 1 && w < words; w += nth) {
      Pack<E> acc;
      acc.word = loadWord(reinterpret_cast<const Word16*>(src[0] + srcOff) + w);
      first<E, kScale>(acc, s);
      for (uint32_t p = 1; p < nsrc; ++p) {
        Pack<E> x;
        x.word = loadWord(reinterpret_cast<const Word16*>(src[p] + srcOff) + w);
        combine<E, Op, kScale>(acc, x, s);
      }
      finish<E, kDivide>(acc, divisor);
      for (uint32_t q = 0; q < ndst; ++q)
        storeWord(reinterpret_cast<Word16*>(dst[q] + dstOff) + w, acc.word);
    }
    scalarFrom = words * kPer;
  }
  for (uint64_t j = scalarFrom + tid; j < n; j += nth) {
    S v = reinterpret_cast<const S*>(src[0] + srcOff)[j];
    if constexpr (kScale) v = elements::scale<E>(v, s);
    for (uint32_t p = 1; p < nsrc; ++p)
      v = elements::combine<E, Op, false, kScale>(v, reinterpret_cast<const S*>(src[p] + srcOff)[j],
                                                  s, s);
    if constexpr (kDivide) v = elements::divide<E>(v, divisor);
    for (uint32_t q = 0; q < ndst; ++q) reinterpret_cast<S*>(dst[q] + dstOff)[j] = v;
  }
}

// Moves `bytes` (a multiple of elemSize) in words of T, this thread's share: from src to every
// dst[q] + dstOff (skipping a destination that is the source itself), and, when src2 is set,
// from src2 to dst2 too, both read before either is written (alltoall's swaps in place).
template <class T>
WEFT_HD WEFT_NOINLINE void moveWords(const char* src, char* const* dst, uint32_t ndst,
                                     uint64_t dstOff, const char* src2, char* dst2, uint64_t words,
                                     uint32_t tid, uint32_t nth) {
  const T* a = reinterpret_cast<const T*>(src);
  const T* b = reinterpret_cast<const T*>(src2);
  T* d2 = reinterpret_cast<T*>(dst2);
  uint64_t w = tid;
  if (!src2) {
    for (; w + (kDirectUnroll - 1) * nth < words; w += kDirectUnroll * nth) {
      T v[kDirectUnroll];
      WEFT_UNROLL
      for (uint32_t k = 0; k < kDirectUnroll; ++k) v[k] = loadWord(a + w + k * nth);
      for (uint32_t q = 0; q < ndst; ++q) {
        T* d = reinterpret_cast<T*>(dst[q] + dstOff);
        if (d == a) continue;
        WEFT_UNROLL
        for (uint32_t k = 0; k < kDirectUnroll; ++k) storeWord(d + w + k * nth, v[k]);
      }
    }
  }
  for (; w < words; w += nth) {
    const T v = loadWord(a + w);
    const T v2 = b ? loadWord(b + w) : T{};
    for (uint32_t q = 0; q < ndst; ++q) {
      T* d = reinterpret_cast<T*>(dst[q] + dstOff);
      if (d != a) storeWord(d + w, v);
    }
    if (b && d2 != b) storeWord(d2 + w, v2);
  }
}

// The same for any alignment: 16-byte words where every pointer allows, else words of the
// element size (which divides every offset).
WEFT_HD inline void moveRange(const char* src, char* const* dst, uint32_t ndst, uint64_t dstOff,
                              const char* src2, char* dst2, uint64_t bytes, uint32_t elemSize,
                              uint32_t tid, uint32_t nth) {
  bool vec = aligned16(src) && (!src2 || (aligned16(src2) && aligned16(dst2)));
  for (uint32_t q = 0; q < ndst; ++q) vec = vec && aligned16(dst[q] + dstOff);
  uint64_t done = 0;
  if (vec) {
    done = bytes / 16 * 16;
    moveWords<Word16>(src, dst, ndst, dstOff, src2, dst2, bytes / 16, tid, nth);
  }
  if (done == bytes) return;
  // The tail (or everything, unaligned) in elements.
  const char* s = src + done;
  const char* s2 = src2 ? src2 + done : nullptr;
  char* d2 = src2 ? dst2 + done : nullptr;
  const uint64_t off = dstOff + done, rest = bytes - done;
  switch (elemSize) {
    case 8:
      moveWords<uint64_t>(s, dst, ndst, off, s2, d2, rest / 8, tid, nth);
      break;
    case 4:
      moveWords<uint32_t>(s, dst, ndst, off, s2, d2, rest / 4, tid, nth);
      break;
    case 2:
      moveWords<uint16_t>(s, dst, ndst, off, s2, d2, rest / 2, tid, nth);
      break;
    default:
      moveWords<uint8_t>(s, dst, ndst, off, s2, d2, rest, tid, nth);
      break;
  }
}

}  // namespace direct
}  // namespace weft::cuda
