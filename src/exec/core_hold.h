// Core sharing: where ranks outnumber the cores, a waiting rank's yield hands its core to a
// rank pinned beside it, a context switch that in a small exchange costs more than the call's
// work, and buys something only where the mate can move on and that helps. So a waiting rank
// parks on its doorbell and keeps the core, polling, while it waits only on ranks of other
// cores that are busy (they deliver without its yielding), or while no mate could move anyway
// (parked, nothing rung since). It yields at once where it waits on a mate, or where all it
// waits on are parked and a mate could move (they may wait on the mate). After Tuning::holdNs
// of holding it yields all the same (a missed ring, a peer waiting in another communicator).
// Ranks without mates park too: those that wait on them look. See perf/README.md, "Holding a
// shared core".
#pragma once
#include <cstdint>

#include "src/common/clock.h"
#include "src/common/doorbell.h"
#include "src/exec/work.h"

namespace weft::exec {

class CoreHold {
 public:
  // `cores` is null where no core sharing applies (Communicator builds none when holdNs is 0).
  CoreHold(Doorbell* bell, const CoreSharing* cores, uint64_t holdNs)
      : bell_(cores ? bell : nullptr), cores_(cores), holdNs_(holdNs) {}
  ~CoreHold() { progressed(); }
  CoreHold(const CoreHold&) = delete;
  CoreHold& operator=(const CoreHold&) = delete;

  void progressed() {
    if (parked_) bell_->unpark();
    parked_ = false;
    since_ = 0;
  }

  // After a poll of `set` (a TaskSet) that found nothing: true to poll again without yielding.
  template <class Set>
  bool hold(const Set& set) {
    // Only where such Works run does anyone look at the parking, so others do not park.
    if (!bell_ || !set.holdsCore()) return false;
    if (!parked_) {  // park, then poll once more: a ring before the park is seen by that poll
      bell_->park();
      parked_ = true;
      return true;
    }
    if (cores_->mates.empty()) return false;  // a yield gives the core to nobody: cheap
    bool onMate = false, awaitedMove = false;
    set.everyAwaitedPeer([&](int peer) {
      if (peer < 0 || static_cast<size_t>(peer) >= cores_->mate.size()) return true;
      if (cores_->mate[peer]) return !(onMate = true);
      const Doorbell* b = cores_->bells[peer];
      if (b && b->busy()) awaitedMove = true;
      return true;
    });
    if (onMate) return false;
    if (!awaitedMove)
      for (const Doorbell* mate : cores_->mates)
        if (mate->mayMove()) return false;
    const uint64_t now = nowNs();
    if (since_ == 0) {
      since_ = now;
    } else if (now - since_ > holdNs_) {
      since_ = 0;
      return false;
    }
    cpuRelax();
    cpuRelax();
    return true;
  }

 private:
  Doorbell* bell_;
  const CoreSharing* cores_;
  uint64_t holdNs_;
  bool parked_ = false;
  uint64_t since_ = 0;
};

}  // namespace weft::exec
