// Flags, counters and waiting for the device interpreter, written once for the GPU and the host:
// on the GPU, PTX acquire/release at the narrowest scope that reaches the other end (Scope::kGpu
// where it runs on the same GPU: a rank's own lanes, or FIFOs whose every rank is on this GPU;
// Scope::kSystem where it may be another GPU or a CPU: FIFOs between GPUs, and the abort and
// status words in pinned host memory, which the host reads and writes); on the host, the GCC atomic
// builtins (C++17-safe: nvcc compiles the host side as C++17, where std::atomic_ref does not
// exist). Waits back off (nanosleep on the GPU; pause, yield, then sleep on the host) and measure
// time so that every wait can give up.
#pragma once
#include <cstdint>

#include "src/common/host_device.h"

#if !defined(__CUDA_ARCH__)
#include <sched.h>
#include <time.h>
#endif

namespace weft::cuda::sync {

// Who may be at the other end of a flag or counter (the host build ignores it).
enum class Scope : uint32_t { kGpu = 0, kSystem = 1 };

WEFT_HD_INLINE uint64_t loadAcquire(const uint64_t* p, Scope scope = Scope::kSystem) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  if (scope == Scope::kGpu)
    asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  (void)scope;
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

// Publishes `v` after everything this thread (and, on the GPU, its block, once it passed a
// barrier) wrote before.
WEFT_HD_INLINE void storeRelease(uint64_t* p, uint64_t v, Scope scope = Scope::kSystem) {
#if defined(__CUDA_ARCH__)
  if (scope == Scope::kGpu) {
    __threadfence();
    asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  } else {
    __threadfence_system();
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
#else
  (void)scope;
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

// Publishes a 32-bit word at system scope (the host reads it) after everything this thread
// wrote before.
WEFT_HD_INLINE void storeRelease32(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
  asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

// A value only its own writer stores (a lane's own counters): no ordering needed.
WEFT_HD_INLINE uint64_t loadRelaxed(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const volatile uint64_t*>(p);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

WEFT_HD_INLINE uint32_t loadFlag(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const volatile uint32_t*>(p);
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

WEFT_HD_INLINE void raiseFlag(uint32_t* p) {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
  *reinterpret_cast<volatile uint32_t*>(p) = 1;
#else
  __atomic_store_n(p, 1u, __ATOMIC_RELEASE);
#endif
}

// Sets *p from 0 to v; false when it was already set (the first writer wins).
WEFT_HD_INLINE bool claim(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  return atomicCAS_system(reinterpret_cast<unsigned*>(p), 0u, v) == 0u;
#else
  uint32_t expected = 0;
  return __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
#endif
}

// Adds 1 and returns the old value, ordered after this thread's earlier writes and before its
// later reads.
WEFT_HD_INLINE uint64_t fetchAddAcqRel(uint64_t* p, Scope scope = Scope::kSystem) {
#if defined(__CUDA_ARCH__)
  if (scope == Scope::kGpu) {
    __threadfence();
    const uint64_t old = atomicAdd(reinterpret_cast<unsigned long long*>(p), 1ull);
    __threadfence();
    return old;
  }
  __threadfence_system();
  const uint64_t old = atomicAdd_system(reinterpret_cast<unsigned long long*>(p), 1ull);
  __threadfence_system();
  return old;
#else
  (void)scope;
  return __atomic_fetch_add(p, 1, __ATOMIC_ACQ_REL);
#endif
}

// Nanoseconds of a monotonic clock (the GPU's global timer, the host's CLOCK_MONOTONIC).
WEFT_HD_INLINE uint64_t nowNs() {
#if defined(__CUDA_ARCH__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
#endif
}

// Rounds of a wait spent spinning before backing off, and between clock reads.
inline constexpr uint32_t kSpinRounds = 64;
inline constexpr uint32_t kYieldRounds = 256;
// Rounds of a wait between reads of the abort word: on the GPU it lives in pinned host memory,
// and reading it crosses PCIe or NVLink-C2C; on the host it is a cache line like any other.
#if defined(__CUDA_ARCH__)
inline constexpr uint32_t kAbortPollRounds = 256;
#else
inline constexpr uint32_t kAbortPollRounds = 1;
#endif

// One round of a wait that has already taken `round` rounds.
WEFT_HD_INLINE void backoff(uint32_t round) {
#if defined(__CUDA_ARCH__)
  if (round >= kSpinRounds) __nanosleep(round >= kYieldRounds ? 1000 : 100);
#else
  if (round < kSpinRounds) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else if (round < kYieldRounds) {
    sched_yield();
  } else {
    // Many host lanes share few cores in tests: sleeping lets the ones that can move run.
    const timespec pause{0, 50 * 1000};
    nanosleep(&pause, nullptr);
  }
#endif
}

}  // namespace weft::cuda::sync
