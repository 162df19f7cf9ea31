#include "src/common/shared_region.h"

#include <unistd.h>

#include <map>
#include <mutex>

namespace weft {
namespace {
std::mutex gMu;
std::map<const char*, SharedRegion>& regions() {
  static std::map<const char*, SharedRegion> m;
  return m;
}
}  // namespace

void addSharedRegion(const SharedRegion& region) {
  std::lock_guard<std::mutex> lock(gMu);
  regions()[static_cast<const char*>(region.base)] = region;
}

bool removeSharedRegion(const void* base, SharedRegion* out) {
  std::lock_guard<std::mutex> lock(gMu);
  auto it = regions().find(static_cast<const char*>(base));
  if (it == regions().end()) return false;
  *out = it->second;
  regions().erase(it);
  return true;
}

bool findSharedRegion(const void* ptr, size_t bytes, SharedRegion* out) {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(gMu);
  if (regions().empty()) return false;
  auto it = regions().upper_bound(p);
  if (it == regions().begin()) return false;
  --it;
  const SharedRegion& r = it->second;
  if (p + bytes > static_cast<const char*>(r.base) + r.bytes) return false;
  *out = r;
  return true;
}

void touchPages(void* p, size_t bytes, bool writable) {
  char* c = static_cast<char*>(p);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t at = 0; at < bytes; at += page) {
    if (writable)
      __atomic_fetch_add(c + at, 0, __ATOMIC_RELAXED);
    else
      (void)*static_cast<volatile const char*>(c + at);
  }
}

}  // namespace weft
