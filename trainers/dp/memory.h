// Memory a data-parallel rank holds, measured and as the ZeRO paper's formulas give it.
//
// The paper (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
// Models") counts model states per rank for Psi parameters and Nd data-parallel ranks under mixed
// precision: 2 Psi (fp16 parameters) + 2 Psi (fp16 gradients) + K Psi (optimizer states: fp32
// parameters, momentum and variance, K = 12) bytes. These trainers do not use mixed precision:
// parameters and gradients are one element each and AdamW keeps m and v, so K = 2 elements and
// the baseline is (1 + 1 + 2) Psi elements:
//
//   plain DP   (1 + 1 + 2) Psi
//   ZeRO-1     (1 + 1) Psi + 2 Psi / Nd         (optimizer states sharded)
//   ZeRO-2     1 Psi + (1 + 2) Psi / Nd          (gradients too)
//   ZeRO-3     (1 + 1 + 2) Psi / Nd              (parameters too)
//
// With each layer padded to a multiple of Nd, Psi / Nd is exactly the shard size (the sum of the
// layers' slices), which is what the exact formula uses.
//
// Measured: the resident bytes (mincore) of the rank's full-size parameter and gradient buffers,
// whose pages ZeRO-2/3 give back to the kernel (madvise) when they no longer hold them, plus the
// shard buffers and optimizer states the engine keeps. Transient buffers (a step's staging
// buffers, one gathered layer) are reported apart, as the paper keeps them out of model states.
#pragma once

#include <cstddef>
#include <string>

namespace weft::trainers {

// Zeroes [data, data + bytes) and returns its whole pages to the kernel (they read as zero
// afterwards and hold no memory until written again). Partial pages at either end stay.
void release_memory(void* data, size_t bytes);

// Bytes of [data, data + bytes) on resident pages (partial pages count their overlap only).
size_t resident_bytes(const void* data, size_t bytes);

struct ZeroFormula {
  int stage = 0;
  int ranks = 1;
  size_t psi = 0;    // parameters (elements) of the rank's flat buffer
  size_t shard = 0;  // elements of one padded shard (Psi / Nd rounded up per layer)
  size_t element_bytes = 4;
  // Bytes each kind of state takes on one rank under this stage.
  size_t param_bytes() const;
  size_t grad_bytes() const;
  size_t optimizer_bytes() const;
  size_t total_bytes() const { return param_bytes() + grad_bytes() + optimizer_bytes(); }
  // The paper's form with Psi / Nd unrounded, for printing next to the exact one.
  double paper_bytes() const;
  std::string describe() const;  // "ZeRO-2: Psi 1000 x 4 B: (1) Psi + (1+2) Psi/Nd = ..."
};

struct MemoryReport {
  ZeroFormula formula;
  size_t params = 0, grads = 0, optimizer = 0;  // measured bytes held between steps
  size_t transient = 0;  // the largest transient buffers of the last step (staging, gathers)
  size_t total() const { return params + grads + optimizer; }
  std::string describe() const;
};

}  // namespace weft::trainers
