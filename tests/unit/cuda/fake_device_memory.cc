#include "tests/unit/cuda/fake_device_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>

namespace weft::fake {
namespace {

struct Table {
  std::mutex mu;
  std::map<uintptr_t, Allocation> byBase;
  uint64_t nextId = 1;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: streams may run while the process exits
  return *t;
}

size_t pages(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

}  // namespace

void* allocateDevice(size_t bytes) {
  const size_t size = pages(bytes == 0 ? 1 : bytes);
  const int fd = memfd_create("weft-fake-device", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  const auto base = reinterpret_cast<uintptr_t>(p);
  t.byBase[base] = Allocation{base, size, t.nextId++, fd, false, currentDevice()};
  return p;
}

bool freeDevice(void* base) {
  Allocation a;
  {
    Table& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.byBase.find(reinterpret_cast<uintptr_t>(base));
    if (it == t.byBase.end() || it->second.imported) return false;
    a = it->second;
    t.byBase.erase(it);
  }
  munmap(base, a.bytes);
  close(a.fd);
  return true;
}

bool findDevice(uintptr_t address, Allocation* out) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.byBase.upper_bound(address);
  if (it == t.byBase.begin()) return false;
  --it;
  if (address >= it->first + it->second.bytes) return false;
  *out = it->second;
  return true;
}

void* importDevice(int pid, int fd, size_t bytes) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int local = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (local < 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
  close(local);
  if (p == MAP_FAILED) return nullptr;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  const auto base = reinterpret_cast<uintptr_t>(p);
  t.byBase[base] = Allocation{base, bytes, t.nextId++, -1, true, currentDevice()};
  return p;
}

bool closeImported(void* base) {
  size_t bytes = 0;
  {
    Table& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.byBase.find(reinterpret_cast<uintptr_t>(base));
    if (it == t.byBase.end() || !it->second.imported) return false;
    bytes = it->second.bytes;
    t.byBase.erase(it);
  }
  munmap(base, bytes);
  return true;
}

}  // namespace weft::fake
