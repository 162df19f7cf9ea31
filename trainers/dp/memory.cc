#include "trainers/dp/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace weft::trainers {
namespace {

uintptr_t page_size() { return static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

void release_memory(void* data, size_t bytes) {
  if (bytes == 0) return;
  std::memset(data, 0, bytes);
  const uintptr_t page = page_size();
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end <= begin) return;
  // Private anonymous memory (the heap and malloc's own mappings): the pages are dropped and
  // read back as zeros, which the memset above made them anyway.
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0)
    throw std::runtime_error("release_memory: madvise failed");
}

size_t resident_bytes(const void* data, size_t bytes) {
  if (bytes == 0) return 0;
  const uintptr_t page = page_size();
  const uintptr_t lo = reinterpret_cast<uintptr_t>(data), hi = lo + bytes;
  const uintptr_t first = lo / page * page;
  const size_t pages = (hi - first + page - 1) / page;
  std::vector<unsigned char> in_core(pages);
  if (mincore(reinterpret_cast<void*>(first), hi - first, in_core.data()) != 0)
    throw std::runtime_error("resident_bytes: mincore failed");
  size_t total = 0;
  for (size_t i = 0; i < pages; ++i) {
    if ((in_core[i] & 1) == 0) continue;
    const uintptr_t a = std::max(lo, first + i * page), b = std::min(hi, first + (i + 1) * page);
    total += b - a;
  }
  return total;
}

size_t ZeroFormula::param_bytes() const { return (stage >= 3 ? shard : psi) * element_bytes; }

size_t ZeroFormula::grad_bytes() const { return (stage >= 2 ? shard : psi) * element_bytes; }

size_t ZeroFormula::optimizer_bytes() const {
  return 2 * (stage >= 1 ? shard : psi) * element_bytes;
}

double ZeroFormula::paper_bytes() const {
  const double p = static_cast<double>(psi), per = p / ranks;
  const double e = static_cast<double>(element_bytes);
  switch (stage) {
    case 0:
      return (1 + 1 + 2) * p * e;
    case 1:
      return ((1 + 1) * p + 2 * per) * e;
    case 2:
      return (1 * p + (1 + 2) * per) * e;
    default:
      return (1 + 1 + 2) * per * e;
  }
}

std::string ZeroFormula::describe() const {
  static const char* const kForms[] = {"(1+1+2) Psi", "(1+1) Psi + 2 Psi/Nd",
                                       "1 Psi + (1+2) Psi/Nd", "(1+1+2) Psi/Nd"};
  std::ostringstream out;
  out << (stage == 0 ? "DP    " : "ZeRO-" + std::to_string(stage)) << ": Psi " << psi << ", Nd "
      << ranks << ", " << element_bytes << " B/element, K = 2 (AdamW m, v; no mixed "
      << "precision): " << kForms[std::min(stage, 3)] << " = " << paper_bytes()
      << " B; padded shard " << shard << " -> " << total_bytes() << " B";
  return out.str();
}

std::string MemoryReport::describe() const {
  std::ostringstream out;
  out << formula.describe() << "\n  measured: params " << params << " B (formula "
      << formula.param_bytes() << "), grads " << grads << " B (formula " << formula.grad_bytes()
      << "), optimizer " << optimizer << " B (formula " << formula.optimizer_bytes() << "), total "
      << total() << " B (formula " << formula.total_bytes() << "); transient buffers " << transient
      << " B";
  return out.str();
}

}  // namespace weft::trainers
