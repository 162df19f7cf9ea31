#include "transports/ib/mr_cache.h"

#include <algorithm>

namespace weft::ib {

MrCache::MrCache(MrOps ops, size_t pageBytes, size_t retainedBytes)
    : ops_(std::move(ops)), page_(pageBytes), retained_(retainedBytes) {}

MrCache::~MrCache() {
  for (auto& [base, e] : valid_) ops_.dereg(e->keys.handle);
  for (auto& e : retired_) ops_.dereg(e->keys.handle);
}

MrCache::Entry* MrCache::findCovering(uintptr_t addr, size_t bytes) const {
  auto it = valid_.upper_bound(addr);
  if (it == valid_.begin()) return nullptr;
  Entry* e = std::prev(it)->second.get();
  return e->contains(addr, bytes) ? e : nullptr;
}

MrCache::Entry* MrCache::obtain(uintptr_t addr, size_t bytes, std::string* why) {
  bytes = std::max<size_t>(bytes, 1);
  if (addr == 0 || addr > UINTPTR_MAX - page_ || bytes > UINTPTR_MAX - page_ - addr) {
    *why = "cannot register " + std::to_string(bytes) + " B at address " + std::to_string(addr);
    return nullptr;
  }
  if (Entry* e = findCovering(addr, bytes)) return e;
  uintptr_t lo = addr & ~(page_ - 1);
  uintptr_t hi = (addr + bytes + page_ - 1) & ~(page_ - 1);
  // Idle and owned regions the range overlaps are merged into it (grown until none is left);
  // a region a transfer holds is not (a stream of slices would otherwise register its whole
  // past again with every slice): it stays as it is unless the new range contains it.
  std::vector<Entry*> merged;
  for (bool grew = true; grew;) {
    grew = false;
    auto it = valid_.upper_bound(lo);
    if (it != valid_.begin()) --it;
    for (; it != valid_.end() && it->first < hi; ++it) {
      Entry* e = it->second.get();
      if (e->base + e->bytes <= lo || (e->holds > 0 && e->owners.empty())) continue;
      if (std::find(merged.begin(), merged.end(), e) != merged.end()) continue;
      merged.push_back(e);
      if (e->base < lo || e->base + e->bytes > hi) grew = true;
      lo = std::min(lo, e->base);
      hi = std::max(hi, e->base + e->bytes);
    }
  }
  std::vector<Entry*> replaced = merged;
  for (auto it = valid_.lower_bound(lo); it != valid_.end() && it->first < hi; ++it) {
    Entry* e = it->second.get();
    if (e->base + e->bytes <= hi &&
        std::find(replaced.begin(), replaced.end(), e) == replaced.end())
      replaced.push_back(e);  // a held region inside the new one: no hits for it any more
  }
  MrKeys keys = ops_.reg(lo, hi - lo, why);
  if (!keys.handle) return nullptr;
  auto fresh = std::make_unique<Entry>();
  fresh->base = lo;
  fresh->bytes = hi - lo;
  fresh->keys = keys;
  for (Entry* e : replaced) {
    fresh->owners.insert(e->owners.begin(), e->owners.end());
    e->owners.clear();
    retire(e);
  }
  Entry* raw = fresh.get();
  valid_.emplace(lo, std::move(fresh));
  return raw;
}

const MrCache::Region* MrCache::acquire(const void* addr, size_t bytes, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* e = obtain(reinterpret_cast<uintptr_t>(addr), bytes, why);
  if (!e) return nullptr;
  busy(e);
  ++e->holds;
  return e;
}

void MrCache::release(const Region* r) {
  if (!r) return;
  std::lock_guard<std::mutex> lock(mu_);
  Entry* e = static_cast<Entry*>(const_cast<Region*>(r));
  if (--e->holds > 0) return;
  if (!e->valid) {
    retire(e);  // unheld now: deregistered
    return;
  }
  if (e->owners.empty()) idle(e);
}

bool MrCache::registerOwned(const void* owner, const void* addr, size_t bytes, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* e = obtain(reinterpret_cast<uintptr_t>(addr), bytes, why);
  if (!e) return false;
  busy(e);
  e->owners.insert(owner);
  return true;
}

void MrCache::deregisterOwned(const void* owner, const void* addr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t hi = lo + std::max<size_t>(bytes, 1);
  std::vector<Entry*> gone;
  auto it = valid_.upper_bound(lo);
  if (it != valid_.begin()) --it;
  for (; it != valid_.end() && it->first < hi; ++it) {
    Entry* e = it->second.get();
    if (e->base + e->bytes <= lo || e->owners.erase(owner) == 0) continue;
    if (e->owners.empty()) gone.push_back(e);
  }
  for (Entry* e : gone) retire(e);
}

void MrCache::setRetainedBytes(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  retained_ = bytes;
  trim();
}

void MrCache::busy(Entry* e) {
  if (!e->inLru) return;
  lru_.erase(e->lru);
  lruBytes_ -= e->bytes;
  e->inLru = false;
}

void MrCache::idle(Entry* e) {
  lru_.push_front(e);
  e->lru = lru_.begin();
  e->inLru = true;
  lruBytes_ += e->bytes;
  trim();
}

void MrCache::trim() {
  while (lruBytes_ > retained_ && !lru_.empty()) retire(lru_.back());
}

void MrCache::retire(Entry* e) {
  busy(e);
  std::unique_ptr<Entry> owned;
  if (e->valid) {
    auto it = valid_.find(e->base);
    owned = std::move(it->second);
    valid_.erase(it);
    e->valid = false;
  } else {
    auto it = std::find_if(retired_.begin(), retired_.end(),
                           [e](const std::unique_ptr<Entry>& r) { return r.get() == e; });
    owned = std::move(*it);
    retired_.erase(it);
  }
  if (e->holds > 0 || !e->owners.empty()) {
    retired_.push_back(std::move(owned));  // a posted transfer still uses it
    return;
  }
  ops_.dereg(e->keys.handle);
}

size_t MrCache::validRegions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return valid_.size();
}

size_t MrCache::liveRegistrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return valid_.size() + retired_.size();
}

size_t MrCache::retainedBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lruBytes_;
}

}  // namespace weft::ib
