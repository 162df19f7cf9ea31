// Memory registration cache of one protection domain: user buffers that RDMA reads from or
// writes into must be registered (ibv_reg_mr pins their pages and gives the keys), which costs
// far more than a small transfer, so registrations are kept and shared by address range.
//
// Rules:
// - A region is registered over whole pages; a request inside a valid region is a hit.
// - A request that overlaps valid regions without fitting in one registers its range merged
//   with the overlapped regions that no transfer holds (or that the user registered); a held
//   region is merged only where the new range contains it. Replaced regions stop taking hits
//   and are deregistered once no transfer uses them. Valid regions never contain one another,
//   so the one with the nearest base below an address is the one that can hold it.
// - A transfer holds its region (acquire .. release) from before it is posted until its
//   completion: a held region is never deregistered.
// - ncclCommRegister owns a region (registerOwned) until ncclCommDeregister (deregisterOwned),
//   which invalidates it. Regions registered on first use and no longer held are kept, least
//   recently used first out, up to `retainedBytes`: the rest are deregistered at once.
//   Memory freed and mapped again at the same address while its registration is kept would be
//   written through the old pages, so only buffers the user registered are kept by default
//   (retainedBytes 0); a caller that knows its buffers live long may raise it.
// The verbs calls are injected, so that the range logic is tested without a device.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace weft::ib {

struct MrKeys {
  void* handle = nullptr;  // the ibv_mr (opaque here); null: registration failed
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

struct MrOps {
  // Registers [base, base + bytes) (page aligned); handle null and *why on failure.
  std::function<MrKeys(uintptr_t base, size_t bytes, std::string* why)> reg;
  std::function<void(void* handle)> dereg;
};

class MrCache {
 public:
  struct Region {
    uintptr_t base = 0;
    size_t bytes = 0;
    MrKeys keys;
    bool contains(uintptr_t addr, size_t len) const {
      return addr >= base && len <= bytes && addr - base <= bytes - len;
    }
  };

  MrCache(MrOps ops, size_t pageBytes, size_t retainedBytes);
  ~MrCache();  // deregisters everything
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // A registered region holding [addr, addr + bytes), held until release(); null and *why when
  // it cannot be registered. bytes 0 is taken as 1.
  const Region* acquire(const void* addr, size_t bytes, std::string* why);
  void release(const Region* r);

  // ncclCommRegister / ncclCommDeregister on behalf of `owner` (one per communicator; calls
  // repeated for the same owner and range count once).
  bool registerOwned(const void* owner, const void* addr, size_t bytes, std::string* why);
  void deregisterOwned(const void* owner, const void* addr, size_t bytes);

  void setRetainedBytes(size_t bytes);

  // For tests and logs.
  size_t validRegions() const;
  size_t liveRegistrations() const;  // valid ones plus replaced ones still held
  size_t retainedBytes() const;      // unheld, unowned regions kept

 private:
  struct Entry : Region {
    int holds = 0;
    std::set<const void*> owners;
    bool valid = true;
    std::list<Entry*>::iterator lru;  // in lru_ while idle (no holds, no owners, valid)
    bool inLru = false;
  };
  Entry* findCovering(uintptr_t addr, size_t bytes) const;
  Entry* obtain(uintptr_t addr, size_t bytes, std::string* why);
  void idle(Entry* e);    // no holds, no owners: keep (LRU) or drop
  void busy(Entry* e);    // leaves the LRU
  void retire(Entry* e);  // stops taking hits; dropped once unheld and unowned
  void trim();

  MrOps ops_;
  size_t page_;
  size_t retained_;
  mutable std::mutex mu_;
  std::map<uintptr_t, std::unique_ptr<Entry>> valid_;  // by base, none inside another
  std::vector<std::unique_ptr<Entry>> retired_;        // replaced or invalidated, still held
  std::list<Entry*> lru_;                              // most recently idle at the front
  size_t lruBytes_ = 0;
};

}  // namespace weft::ib
