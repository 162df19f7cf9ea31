// Plans synthesized for a communicator's topology (WEFT_SYNTH): tree packings and searched rings
// simulated against the built-in ring on the ranks' fabric, the winners in a PlanLibrary with
// the byte windows where they win. Selections are cached on disk by fabric (WEFT_CACHE_DIR) and
// shared in the process while a communicator uses them (thread ranks synthesize once).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "src/common/tuning.h"
#include "src/select/plan_library.h"
#include "src/topo/system.h"
#include "synth/model/fabric.h"

namespace weft::core {

// WEFT_SYNTH as `tuning` gives it: 0 off, 1 on, 2 auto (the default; also for unknown values).
uint32_t synthesisMode(const Tuning& tuning);
// Whether a mode (rank 0's, so every rank agrees) turns synthesis on for this system: auto is on
// when the system has GPUs or several hosts.
bool synthesisEnabled(uint32_t mode, const topo::SystemTopology& system);

// A digest of a library's plans (0 for none), for ranks to check they hold the same.
uint64_t libraryDigest(const select::PlanLibrary* library);

struct SynthPlans {
  std::shared_ptr<const select::PlanLibrary> library;  // nullptr: nothing won anywhere
  std::string origin;   // "synthesized in 0.4 s, stored in DIR", "disk cache DIR", "process cache"
  std::string notes;    // skipped methods, rejected cache entries ("" when none)
  uint64_t digest = 0;  // libraryDigest(library)
};

// The synthesized plans for `fabric`, cached under `cacheDir` (WEFT_CACHE_DIR; empty: the
// default place); throws weft::Error when synthesis itself fails (the caller logs it and goes on
// without).
SynthPlans synthesizedPlans(const synth::Fabric& fabric, const std::string& cacheDir);

}  // namespace weft::core
