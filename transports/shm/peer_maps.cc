#include "transports/shm/peer_maps.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "src/common/log.h"
#include "src/common/shared_region.h"

namespace weft::transport {
namespace {

struct Mapping {
  char* local = nullptr;
  uint64_t bytes = 0;
  int users = 0;         // messages being read through it
  uint64_t lastUse = 0;  // acquisition tick, for evicting the least recently used
};

using Key = std::tuple<int, uint64_t, uint64_t, bool>;  // pid, inode, base, writable
std::mutex gMu;
uint64_t gTick = 0;
std::map<Key, Mapping>& mappings() {
  static std::map<Key, Mapping> m;
  return m;
}

// Mappings of regions a peer has since freed would keep its memory alive: past this many, idle
// ones are unmapped, least recently used first.
constexpr size_t kKeepMappings = 16;

Mapping mapRegion(int pid, const MappedRef& ref, bool writable) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(ref.fd);
  int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) {
    WEFT_INFO(SHM, "cannot open %s (%s): shm messages from pid %d are copied", path.c_str(),
              std::strerror(errno), pid);
    return {};
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != ref.inode ||
      static_cast<uint64_t>(st.st_size) < ref.bytes) {
    ::close(fd);
    return {};
  }
  // Populated now: faulting the pages in one by one would cost the first collectives dearly.
  void* p = mmap(nullptr, ref.bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                 MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return {};
  touchPages(p, ref.bytes, writable);
  WEFT_TRACE(SHM, "mapped %llu bytes of pid %d (memfd %d) at %p",
             static_cast<unsigned long long>(ref.bytes), pid, ref.fd, p);
  return {static_cast<char*>(p), ref.bytes, 0, 0};
}

void evictIdle() {
  auto& m = mappings();
  while (m.size() > kKeepMappings) {
    auto victim = m.end();
    for (auto it = m.begin(); it != m.end(); ++it)
      if (it->second.users == 0 &&
          (victim == m.end() || it->second.lastUse < victim->second.lastUse))
        victim = it;
    if (victim == m.end()) return;  // all in use
    munmap(victim->second.local, victim->second.bytes);
    m.erase(victim);
  }
}

}  // namespace

char* acquirePeerRegion(int pid, const MappedRef& ref, void** token, bool writable) {
  std::lock_guard<std::mutex> lock(gMu);
  auto& m = mappings();
  const Key key{pid, ref.inode, ref.base, writable};
  auto it = m.find(key);
  if (it != m.end() && it->second.bytes < ref.bytes && it->second.users == 0) {
    munmap(it->second.local, it->second.bytes);  // the region grew: map it again
    m.erase(it);
    it = m.end();
  }
  if (it == m.end()) {
    Mapping fresh = mapRegion(pid, ref, writable);
    if (!fresh.local) return nullptr;
    it = m.emplace(key, fresh).first;
    ++it->second.users;  // keep the new one out of the eviction below
    evictIdle();
    --it->second.users;
  }
  if (it->second.bytes < ref.bytes) return nullptr;
  ++it->second.users;
  it->second.lastUse = ++gTick;
  *token = &it->second;  // map nodes are stable, and a used mapping is never erased
  return it->second.local;
}

void releasePeerRegion(void* token) {
  std::lock_guard<std::mutex> lock(gMu);
  --static_cast<Mapping*>(token)->users;
}

}  // namespace weft::transport
