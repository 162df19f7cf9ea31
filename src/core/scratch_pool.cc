#include "src/core/scratch_pool.h"

#include <algorithm>

namespace weft::core {

std::shared_ptr<char> ScratchPool::take(size_t bytes) {
  bytes = std::max<size_t>(64, (bytes + 4095) / 4096 * 4096);
  Buffer b;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest idle buffer that fits.
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it)
      if (it->bytes >= bytes && (best == idle_.end() || it->bytes < best->bytes)) best = it;
    if (best != idle_.end()) {
      b = std::move(*best);
      idle_.erase(best);
    }
  }
  if (!b.mem) {
    b.bytes = bytes;
    b.mem.reset(new char[bytes]);
  }
  char* p = b.mem.get();
  std::weak_ptr<ScratchPool> pool = weak_from_this();
  auto holder = std::make_shared<Buffer>(std::move(b));
  return std::shared_ptr<char>(p, [pool, holder](char*) mutable {
    if (auto live = pool.lock()) live->give(std::move(*holder));
  });
}

void ScratchPool::give(Buffer b) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(b));
  if (idle_.size() > kMaxIdle) {
    // Keep the largest: they serve every smaller call too.
    auto smallest =
        std::min_element(idle_.begin(), idle_.end(),
                         [](const Buffer& a, const Buffer& c) { return a.bytes < c.bytes; });
    idle_.erase(smallest);
  }
}

size_t ScratchPool::idleBuffers() {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

}  // namespace weft::core
