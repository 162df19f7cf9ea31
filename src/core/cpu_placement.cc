#include "src/core/cpu_placement.h"

#include <hwloc.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <bit>

#include "src/common/doorbell.h"
#include "src/common/log.h"

namespace weft {

CpuMask CpuMask::ofThisProcess() {
  CpuMask m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    for (auto& w : m.words) w = ~0ull;  // unknown: assume every CPU
    return m;
  }
  for (int c = 0; c < 1024 && c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) m.words[c / 64] |= 1ull << (c % 64);
  return m;
}

void CpuMask::unite(const CpuMask& o) {
  for (int i = 0; i < 16; ++i) words[i] |= o.words[i];
}

bool CpuMask::operator==(const CpuMask& o) const {
  for (int i = 0; i < 16; ++i)
    if (words[i] != o.words[i]) return false;
  return true;
}

int CpuMask::count() const {
  int n = 0;
  for (uint64_t w : words) n += std::popcount(w);
  return n;
}

namespace {

std::atomic<bool> gPinned{false};

// Binds the calling thread to the core coreForSlot() gives, of the cores in `allowed`.
int pinToCore(const CpuMask& allowed, int slot, int slots) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return -1;
  int core = -1;
  if (hwloc_topology_load(topo) == 0) {
    hwloc_bitmap_t allow = hwloc_bitmap_alloc();
    for (int c = 0; c < 1024; ++c)
      if (allowed.words[c / 64] >> (c % 64) & 1) hwloc_bitmap_set(allow, static_cast<unsigned>(c));
    // Cores with at least one allowed CPU, in hwloc's (locality) order.
    std::vector<hwloc_obj_t> cores;
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, o));)
      if (hwloc_bitmap_intersects(o->cpuset, allow)) cores.push_back(o);
    if (!cores.empty()) {
      const int pick = coreForSlot(slot, slots, static_cast<int>(cores.size()));
      hwloc_bitmap_t set = hwloc_bitmap_dup(cores[pick]->cpuset);
      hwloc_bitmap_and(set, set, allow);
      if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_THREAD) == 0) core = pick;
      hwloc_bitmap_free(set);
    }
    hwloc_bitmap_free(allow);
  }
  hwloc_topology_destroy(topo);
  return core;
}

}  // namespace

int coreForSlot(int slot, int slots, int cores) {
  if (cores <= 0 || slots <= 0) return -1;
  if (cores >= slots) return static_cast<int>(static_cast<int64_t>(slot) * cores / slots);
  return slot % cores;
}

void forgetPinnedRank() { gPinned.store(false); }

PlacementResult placeRanksOnHost(const std::vector<LocalRank>& local, int self, bool pin,
                                 bool pinShared) {
  PlacementResult r;
  CpuMask all;
  int selfIndex = -1, inMyProcess = 0;
  const LocalRank* me = nullptr;
  for (size_t i = 0; i < local.size(); ++i)
    if (local[i].rank == self) {
      selfIndex = static_cast<int>(i);
      me = &local[i];
    }
  if (!me) return r;
  for (const LocalRank& l : local) {
    all.unite(l.mask);
    if (l.processHash == me->processHash) ++inMyProcess;
  }
  r.cpus = all.count();
  const int ranks = static_cast<int>(local.size());
  r.ranks = ranks;
  r.oversubscribed =
      ranks > (r.cpus > 0 ? r.cpus : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  if (!pin || ranks < 2 || inMyProcess != 1 || !(me->mask == all)) return r;
  if (r.oversubscribed && !pinShared) return r;
  // Processes are placed in the order of their ranks; with several ranks per process elsewhere
  // on the host the slot is still this rank's index, which keeps slots distinct.
  if (gPinned.exchange(true)) return r;
  r.pinnedCore = pinToCore(all, selfIndex, ranks);
  if (r.pinnedCore < 0)
    gPinned.store(false);
  else
    WEFT_INFO(INIT, "rank %d pinned to core %d of %d usable (%d ranks on this host)", self,
              r.pinnedCore, r.cpus, ranks);
  return r;
}

}  // namespace weft
