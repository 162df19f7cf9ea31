// Where a host's ranks run: whether they outnumber the CPUs they may use (waiters then yield
// instead of spinning), and pinning each single-rank process to its own core so that two
// spinning ranks never share one while another core idles (the scheduler's wake-up placement
// otherwise parks them together for milliseconds at a time).
#pragma once
#include <cstdint>
#include <vector>

namespace weft {

// A process's CPU affinity, as exchanged between ranks at init (CPUs 0..1023).
struct CpuMask {
  uint64_t words[16] = {};
  static CpuMask ofThisProcess();
  void unite(const CpuMask& o);
  bool operator==(const CpuMask& o) const;
  int count() const;
};

// One rank of this host, as the communicator sees it at init.
struct LocalRank {
  int rank = 0;
  uint64_t processHash = 0;  // equal iff the same process
  CpuMask mask;
};

struct PlacementResult {
  int cpus = 0;                 // CPUs the host's ranks may use together
  int ranks = 1;                // the communicator's ranks on this host
  bool oversubscribed = false;  // more ranks than those CPUs
  int pinnedCore = -1;          // the core this thread was bound to, -1 if not pinned
};

// The core (index into the usable cores) for slot `slot` of `slots`: spread evenly while the
// slots fit, else dealt round-robin, so ranks that must share cores share them evenly and
// consecutive ranks (neighbours in rings and chains) sit on different cores.
int coreForSlot(int slot, int slots, int cores);

// Decides for rank `self` (an element of `local`, the ranks of this host in rank order) and, with
// `pin` (Tuning::pin, WEFT_PIN=1 by default), binds the calling thread to one core when that
// helps: this process drives exactly one of the ranks, no launcher bound it already (its mask
// is everyone's union), and no earlier communicator of this process pinned it. Ranks that
// outnumber the cores are pinned round-robin too where `pinShared` (WEFT_PIN_SHARED). Pinned
// ranks run steadily where unpinned ones ran fast or slow from run to run; only a chained
// broadcast loses a little, its forwarding rank waiting for the core its root keeps busy. See
// perf/README.md, "Pinning ranks".
PlacementResult placeRanksOnHost(const std::vector<LocalRank>& local, int self, bool pin,
                                 bool pinShared);

// Forgets that a communicator of this process pinned its rank, so the next placement may pin
// again (for tests that place ranks several times in one process).
void forgetPinnedRank();

}  // namespace weft
