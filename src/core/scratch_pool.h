// Scratch memory for plans that need it, reused across calls: allocating tens of MiB per call
// costs a page fault per 4 KiB every time (glibc maps buffers >= 32 MiB afresh on every malloc).
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::core {

class ScratchPool : public std::enable_shared_from_this<ScratchPool> {
 public:
  // Uninitialised memory of at least `bytes`; it returns to the pool when the last holder drops
  // it (or is freed, if the pool is gone by then). Calls running at once get distinct buffers.
  std::shared_ptr<char> take(size_t bytes);

  size_t idleBuffers();  // for tests

 private:
  struct Buffer {
    size_t bytes = 0;
    std::unique_ptr<char[]> mem;
  };
  void give(Buffer b);

  static constexpr size_t kMaxIdle = 4;  // buffers kept between calls
  std::mutex mu_;
  std::vector<Buffer> idle_;
};

}  // namespace weft::core
