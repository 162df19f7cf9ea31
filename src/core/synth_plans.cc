#include "src/core/synth_plans.h"

#include <map>
#include <mutex>

#include "src/common/error.h"
#include "src/common/log.h"
#include "src/plan/msccl_xml.h"
#include "synth/auto/plan_cache.h"
#include "synth/auto/rank_fabric.h"

namespace weft::core {

uint32_t synthesisMode(const Tuning& tuning) {
  const std::string& mode = tuning.synth;
  if (mode == "1" || mode == "on") return 1;
  if (mode == "0" || mode == "off") return 0;
  if (mode != "auto")
    WEFT_WARN(INIT, "WEFT_SYNTH='%s' is not 0, 1 or auto; using auto", mode.c_str());
  return 2;
}

bool synthesisEnabled(uint32_t mode, const topo::SystemTopology& system) {
  if (mode <= 1) return mode == 1;
  return synth::worthSynthesizing(system);
}

uint64_t libraryDigest(const select::PlanLibrary* library) {
  if (!library) return 0;
  uint64_t h = 1469598103934665603ull;
  for (const select::LibraryPlan& p : library->plans())
    for (unsigned char c : plan::exportMsccl(*p.plan) + p.source + std::to_string(p.predictedUs))
      h = (h ^ c) * 1099511628211ull;
  return h | 1;  // never 0
}

namespace {

// Init stays fast: packing and rings only (no exact solver), a few sizes, a time budget.
synth::SelectionOptions initOptions() {
  synth::SelectionOptions o;
  o.sizes = {256u << 10, 4u << 20, 64u << 20};
  o.budgetSeconds = 5;
  return o;
}

// The library of a selection; false (and *why) when a plan fails the library's checks.
bool toLibrary(const synth::CachedSelection& sel, std::shared_ptr<const select::PlanLibrary>* out,
               std::string* why) {
  if (sel.plans.empty()) {
    out->reset();
    return true;
  }
  auto lib = std::make_shared<select::PlanLibrary>();
  for (const synth::SelectedPlan& p : sel.plans) {
    try {
      lib->add(p.plan, "synth:" + p.method, p.predictedUs);
    } catch (const std::exception& e) {
      *why = p.plan.name + ": " + e.what();
      return false;
    }
  }
  *out = std::move(lib);
  return true;
}

std::string joined(const std::vector<std::string>& notes) {
  std::string s;
  for (const auto& n : notes) s += (s.empty() ? "" : "; ") + n;
  return s;
}

}  // namespace

SynthPlans synthesizedPlans(const synth::Fabric& fabric, const std::string& cacheDir) {
  const synth::SelectionOptions options = initOptions();
  const std::string& root = cacheDir;
  const std::string key = synth::selectionKey(fabric, options) + "@" + root;
  // Shared while some communicator holds it; the mutex makes thread ranks wait for the first.
  static std::mutex mu;
  struct Live {
    std::weak_ptr<const select::PlanLibrary> library;
    bool empty = false;  // nothing won: kept for the process
    SynthPlans first;    // origin and notes as the first communicator found them
  };
  static std::map<std::string, Live> live;
  std::lock_guard<std::mutex> lock(mu);
  SynthPlans out;
  if (auto it = live.find(key); it != live.end()) {
    out = it->second.first;
    out.library = it->second.library.lock();
    if (out.library || it->second.empty) return out;
  }
  synth::CachedSelection sel = synth::cachedSelectPlans(fabric, options, root);
  std::string why;
  if (!toLibrary(sel, &out.library, &why)) {
    if (!sel.fromCache) throw Error(Status::kInternalError, "synthesized plan rejected: " + why);
    sel.notes.push_back("cache entry " + sel.dir + " rebuilt: " + why);
    std::vector<std::string> notes = std::move(sel.notes);
    sel = synth::cachedSelectPlans(fabric, options, root, /*rebuild=*/true);
    notes.insert(notes.end(), sel.notes.begin(), sel.notes.end());
    sel.notes = std::move(notes);
    if (!toLibrary(sel, &out.library, &why))
      throw Error(Status::kInternalError, "synthesized plan rejected: " + why);
  }
  if (sel.fromCache)
    out.origin = "disk cache " + sel.dir;
  else
    out.origin = "synthesized in " + std::to_string(sel.seconds) + " s" +
                 (sel.dir.empty() ? "" : ", stored in " + sel.dir);
  out.notes = joined(sel.notes);
  out.digest = libraryDigest(out.library.get());
  Live& entry = live[key];
  entry.library = out.library;
  entry.empty = !out.library;
  entry.first = out;
  entry.first.library.reset();
  return out;
}

}  // namespace weft::core
