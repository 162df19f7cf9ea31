// The run-time choice of SIMD level, the dispatch of each call to its kernels, and the public
// entry points. The portable scalar kernels are in reduce_scalar.cc.
#include "src/common/reduce.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "src/common/env.h"
#include "src/common/half.h"
#include "src/common/log.h"
#include "src/common/reduce_internal.h"

namespace weft {
namespace {

using kernels::ReduceArgs;
using kernels::reduceScalar;
using kernels::scaleScalar;
using kernels::SimdLevel;

ReduceArgs advanced(ReduceArgs r, size_t done) {
  size_t bytes = done * dataTypeSize(r.type);
  r.dst = static_cast<char*>(r.dst) + bytes;
  r.a = static_cast<const char*>(r.a) + bytes;
  r.b = static_cast<const char*>(r.b) + bytes;
  if (r.dst2) r.dst2 = static_cast<char*>(r.dst2) + bytes;
  r.count -= done;
  return r;
}

// Outputs from this size on are written with streaming stores: beyond the share of last-level
// cache one core can count on, cached stores only evict what the next step reads (the cache
// sizes behind the value: perf/README.md, "Streaming stores").
std::atomic<size_t> gStreamMinBytes{size_t{8} << 20};

// Streaming stores need an aligned destination: the head up to dst's next 64-byte line goes
// through scalar code; returns the rest.
ReduceArgs reduceHeadToLine(ReduceArgs r) {
  const size_t size = dataTypeSize(r.type);
  ReduceArgs first = r;
  first.count = std::min(r.count, (64 - reinterpret_cast<uintptr_t>(r.dst) % 64) % 64 / size);
  reduceScalar(first);
  return advanced(r, first.count);
}

// The level's vector kernel over what it can, scalar code over the rest; returns the elements
// the vector kernel did.
size_t reduceBody(SimdLevel level, const ReduceArgs& r) {
  size_t done = 0;
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512)
    done = kernels::reduceAvx512(r);
  else if (level == SimdLevel::kAvx2)
    done = kernels::reduceAvx2(r);
#endif
  if (done < r.count) reduceScalar(advanced(r, done));
  return done;
}

void runReduce(SimdLevel level, ReduceArgs r, Store store) {
#if defined(__x86_64__)
  const size_t size = dataTypeSize(r.type);
  if (level != SimdLevel::kScalar && r.dst != r.a && r.dst != r.b &&
      reinterpret_cast<uintptr_t>(r.dst) % size == 0 &&
      (store == Store::kStreaming ||
       r.count * size >= gStreamMinBytes.load(std::memory_order_relaxed))) {
    r = reduceHeadToLine(r);
    r.stream = true;
  }
#endif
  reduceBody(level, r);
}

// Non-temporal copy of whole cache lines where the regions do not overlap; the head up to
// dst's next line and the tail go through memcpy.
void streamCopy(SimdLevel level, void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t done = 0;
#if defined(__x86_64__)
  const bool apart = d + bytes <= s || s + bytes <= d;
  if (level != SimdLevel::kScalar && apart) {
    done = std::min(bytes, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
    std::memcpy(d, s, done);
    done += kernels::streamCopyAvx2(d + done, s + done, bytes - done);
  }
#endif
  if (done < bytes) std::memmove(d + done, s + done, bytes - done);
}

void runCopy(SimdLevel level, DataType t, void* dst, const void* src, size_t count,
             const Scalar* scalar, Store store) {
  if (!isValid(t)) return;
  if (!scalar) {
    if (dst == src || count == 0) return;
    if (store == Store::kStreaming)
      streamCopy(level, dst, src, count * dataTypeSize(t));
    else
      std::memmove(dst, src, count * dataTypeSize(t));
    return;
  }
  size_t done = 0;
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512)
    done = kernels::scaleAvx512(t, dst, src, scalar->bytes, count);
  else if (level == SimdLevel::kAvx2)
    done = kernels::scaleAvx2(t, dst, src, scalar->bytes, count);
#endif
  if (done < count) {
    size_t bytes = done * dataTypeSize(t);
    scaleScalar(t, static_cast<char*>(dst) + bytes, static_cast<const char*>(src) + bytes,
                scalar->bytes, count - done);
  }
}

SimdLevel parseLevel(const std::string& s, SimdLevel fallback) {
  if (s == "scalar" || s == "none") return SimdLevel::kScalar;
  if (s == "avx2") return SimdLevel::kAvx2;
  if (s == "avx512") return SimdLevel::kAvx512;
  WEFT_WARN(ENV, "WEFT_SIMD=%s is not one of scalar, avx2, avx512; ignored", s.c_str());
  return fallback;
}

SimdLevel pickLevel() {
  SimdLevel cpu = kernels::cpuSimdLevel();
  std::string forced = env::get("WEFT_SIMD");
  if (forced.empty()) return cpu;
  SimdLevel want = parseLevel(forced, cpu);
  if (static_cast<int>(want) > static_cast<int>(cpu)) {
    WEFT_WARN(ENV, "WEFT_SIMD=%s is not supported by this CPU; using %s", forced.c_str(),
              kernels::simdLevelName(cpu));
    return cpu;
  }
  return want;
}

}  // namespace

namespace kernels {

const char* simdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return "avx512";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kScalar:
      return "scalar";
  }
  return "scalar";
}

SimdLevel cpuSimdLevel() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const SimdLevel kLevel = [] {
    __builtin_cpu_init();
    // __builtin_cpu_supports also checks that the OS saves the AVX / AVX-512 registers. Not every
    // compiler knows "f16c" there, so read that bit from CPUID leaf 1 (usable whenever AVX is).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
      return SimdLevel::kAvx512;
    return avx2 ? SimdLevel::kAvx2 : SimdLevel::kScalar;
  }();
  return kLevel;
#else
  return SimdLevel::kScalar;
#endif
}

size_t streamMinBytes() { return gStreamMinBytes.load(std::memory_order_relaxed); }
void setStreamMinBytes(size_t bytes) { gStreamMinBytes.store(bytes, std::memory_order_relaxed); }

SimdLevel activeSimdLevel() {
  static const SimdLevel kLevel = pickLevel();
  return kLevel;
}

// Up to this many bytes a reduction goes straight to the scalar loop.
constexpr size_t kScalarReduceBytes = 32;

void reduceWith(SimdLevel level, DataType t, RedOp op, void* dst, const void* a, bool scaleA,
                const void* b, bool scaleB, size_t count, const Scalar* scalar, Store store) {
  if (count == 0 || !isValid(t)) return;
  ReduceArgs r{t, op, dst, a, b, nullptr, nullptr, count, false};
  if (op == RedOp::kPreMulSum || op == RedOp::kAvg) r.op = RedOp::kSum;
  if (op == RedOp::kPreMulSum && scalar) {
    if (scaleA) r.scaleA = scalar->bytes;
    if (scaleB) r.scaleB = scalar->bytes;
  }
  // A few elements: straight to the scalar loop (a vector kernel's setup costs more than them).
  if (count * dataTypeSize(t) <= kScalarReduceBytes) return reduceScalar(r);
  runReduce(level, r, store);
}

void reduceTwiceWith(SimdLevel level, DataType t, RedOp op, void* dst, void* dst2, const void* a,
                     bool scaleA, const void* b, bool scaleB, size_t count, const Scalar* scalar,
                     Store store) {
  if (count == 0 || !isValid(t)) return;
  const size_t size = dataTypeSize(t);
  const bool scaled = op == RedOp::kPreMulSum && scalar && (scaleA || scaleB);
  const auto d = reinterpret_cast<uintptr_t>(dst), d2 = reinterpret_cast<uintptr_t>(dst2);
  const auto apart = [&](const void* p) {
    const auto q = reinterpret_cast<uintptr_t>(p);
    return d2 + count * size <= q || q + count * size <= d2;
  };
  bool vector = false;
#if defined(__x86_64__)
  vector = level != SimdLevel::kScalar && !scaled && dst != a && dst != b && apart(dst) &&
           apart(a) && apart(b) && d % size == 0 && d % 64 == d2 % 64;
#endif
  if (!vector) {
    // One pass for dst, then a copy: correct for any layout, operands and scales.
    reduceWith(level, t, op, dst, a, scaleA, b, scaleB, count, scalar, store);
    runCopy(level, t, dst2, dst, count, nullptr, store);
    return;
  }
  ReduceArgs r{t, op, dst, a, b, nullptr, nullptr, count, false};
  if (op == RedOp::kPreMulSum || op == RedOp::kAvg) r.op = RedOp::kSum;
  // Both destinations share their alignment, so one head serves both.
  if (store == Store::kStreaming) r = reduceHeadToLine(r);
  const size_t head = count - r.count;
  r.stream = store == Store::kStreaming;
  r.dst2 = static_cast<char*>(dst2) + head * size;
  const size_t done = reduceBody(level, r);
  // The scalar head and tail reach dst2 by copy.
  std::memcpy(dst2, dst, head * size);
  const size_t from = (head + done) * size;
  std::memcpy(static_cast<char*>(dst2) + from, static_cast<const char*>(dst) + from,
              count * size - from);
}

void copyElementsWith(SimdLevel level, DataType t, void* dst, const void* src, size_t count,
                      const Scalar* scalar, Store store) {
  runCopy(level, t, dst, src, count, scalar, store);
}

}  // namespace kernels

void reduce(DataType t, RedOp op, void* dst, const void* a, bool scaleA, const void* b, bool scaleB,
            size_t count, const Scalar* scalar, Store store) {
  kernels::reduceWith(kernels::activeSimdLevel(), t, op, dst, a, scaleA, b, scaleB, count, scalar,
                      store);
}

void reduceTwice(DataType t, RedOp op, void* dst, void* dst2, const void* a, bool scaleA,
                 const void* b, bool scaleB, size_t count, const Scalar* scalar, Store store) {
  kernels::reduceTwiceWith(kernels::activeSimdLevel(), t, op, dst, dst2, a, scaleA, b, scaleB,
                           count, scalar, store);
}

namespace {
// Copies up to 64 bytes, reading everything before writing anything (so overlap is safe), with
// no call: a small message's copy otherwise cost more in dispatch than in bytes (an 8 B
// broadcast's two copies were a tenth of its instructions).
void copySmall(void* dst, const void* src, size_t bytes) {
  auto d = static_cast<char*>(dst);
  auto s = static_cast<const char*>(src);
  auto both = [&](auto chunk) {  // the first and the last `chunk` bytes, which cover them all
    using C = decltype(chunk);
    C head, tail;
    __builtin_memcpy(&head, s, sizeof(C));
    __builtin_memcpy(&tail, s + bytes - sizeof(C), sizeof(C));
    __builtin_memcpy(d, &head, sizeof(C));
    __builtin_memcpy(d + bytes - sizeof(C), &tail, sizeof(C));
  };
  struct Bytes32 {
    uint64_t w[4];
  };
  struct Bytes16 {
    uint64_t w[2];
  };
  if (bytes >= 32)
    both(Bytes32{});
  else if (bytes >= 16)
    both(Bytes16{});
  else if (bytes >= 8)
    both(uint64_t{});
  else if (bytes >= 4)
    both(uint32_t{});
  else if (bytes >= 2)
    both(uint16_t{});
  else if (bytes == 1)
    *d = *s;
}
constexpr size_t kSmallCopyBytes = 64;
}  // namespace

void copyElements(DataType t, void* dst, const void* src, size_t count, const Scalar* scalar,
                  Store store) {
  if (!scalar && isValid(t)) {
    const size_t bytes = count * dataTypeSize(t);
    if (bytes <= kSmallCopyBytes) {
      if (dst != src) copySmall(dst, src, bytes);
      return;
    }
  }
  runCopy(kernels::activeSimdLevel(), t, dst, src, count, scalar, store);
}

float halfToFloat(uint16_t h) { return fp::halfToFloat(h); }
uint16_t floatToHalf(float f) { return fp::floatToHalf(f); }
float bf16ToFloat(uint16_t h) { return fp::bf16ToFloat(h); }
uint16_t floatToBf16(float f) { return fp::floatToBf16(f); }
float fp8e4m3ToFloat(uint8_t v) { return fp::fp8e4m3ToFloat(v); }
uint8_t floatToFp8e4m3(float f) { return fp::floatToFp8e4m3(f); }
float fp8e5m2ToFloat(uint8_t v) { return fp::fp8e5m2ToFloat(v); }
uint8_t floatToFp8e5m2(float f) { return fp::floatToFp8e5m2(f); }

const char* simdLevel() { return kernels::simdLevelName(kernels::activeSimdLevel()); }

}  // namespace weft
