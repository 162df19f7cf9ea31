// Plans synthesized for a communicator's topology (WEFT_SYNTH): tree packings and searched rings
// simulated against the built-in ring on the ranks' fabric, the winners in a PlanLibrary with
// the byte windows where they win. Selections are cached on disk by fabric (WEFT_CACHE_DIR) and
// shared in the process while a communicator uses them (thread ranks synthesize once).
#pragma once
#include <memory>
#include <string>

#include "src/select/plan_library.h"
#include "src/topo/system.h"
#include "synth/model/fabric.h"

namespace weft::core {

// WEFT_SYNTH: "1" on, "0" off, "auto" (default) on when the system has GPUs or several hosts.
bool synthesisEnabled(const topo::SystemTopology& system);

struct SynthPlans {
  std::shared_ptr<const select::PlanLibrary> library;  // nullptr: nothing won anywhere
  std::string origin;  // "synthesized in 0.4 s, stored in DIR", "disk cache DIR", "process cache"
  std::string notes;   // skipped methods, rejected cache entries ("" when none)
};

// The synthesized plans for `fabric`; throws weft::Error when synthesis itself fails (the caller
// logs it and goes on without).
SynthPlans synthesizedPlans(const synth::Fabric& fabric);

}  // namespace weft::core
