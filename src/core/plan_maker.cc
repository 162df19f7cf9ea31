#include "src/core/plan_maker.h"

#include <algorithm>
#include <optional>

#include "src/bootstrap/bootstrap.h"
#include "src/common/log.h"
#include "src/core/synth_plans.h"
#include "src/select/plan_library.h"
#include "src/select/selector.h"
#include "synth/auto/rank_fabric.h"
#include "synth/model/simulator.h"

namespace weft::core {

uint32_t PlanMaker::synthesisMode(const Tuning& tuning) { return core::synthesisMode(tuning); }

PlanMaker::PlanMaker(const PlanMakerSetup& setup, const Tuning& tuning,
                     std::shared_ptr<const topo::SystemTopology> topology,
                     bootstrap::Bootstrap& boot)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      slotBytes_(setup.slotBytes),
      topology_(std::move(topology)) {
  const int nranks = setup.nranks;
  select::LinkModel model;
  selector_ = std::make_unique<select::Selector>(nranks, model, select::AlgoFilter(tuning.algo));
  // MSCCL XML plans from MSCCL_ALGO_DIR / WEFT_PLAN_DIR (read once per process).
  if (auto library = select::libraryFromEnvironment(tuning); !library->empty())
    selector_->setLibrary(std::move(library), slotBytes_);
  {
    // Ranks on several hosts: the selector also weighs hierarchical plans, with a network model.
    std::vector<int> hostOf(nranks);
    std::vector<uint64_t> hosts;
    for (int r = 0; r < nranks; ++r) {
      auto it = std::find(hosts.begin(), hosts.end(), setup.hostHashes[r]);
      hostOf[r] = static_cast<int>(it - hosts.begin());
      if (it == hosts.end()) hosts.push_back(setup.hostHashes[r]);
    }
    select::LinkModel net;
    net.alphaUs = tuning.netLatencyUs;
    // WEFT_NET_GBPS if set, else what the topology found between hosts (GB/s), else the default.
    double gbps = tuning.netGbps;
    if (double bw = topology_->minInterHostBandwidth(); bw > 0 && !tuning.netGbpsSet) gbps = bw * 8;
    net.betaUsPerByte = 1.0 / (std::max(0.001, gbps) * 125.0);
    selector_->setHosts(hostOf, net);
  }
  selector_->setSharedCores(setup.sharedCores);
  selector_->setCores(setup.coreOf);
  if (synthesisEnabled(setup.synthMode, *topology_))
    attachSynthesizedPlans(boot, tuning.synthCacheDir);
}

PlanMaker::~PlanMaker() = default;

std::string PlanMaker::selectorTable() const { return selector_->table(); }

void PlanMaker::attachSynthesizedPlans(bootstrap::Bootstrap& boot, const std::string& cacheDir) {
  // Synthesis is an optimisation: whatever goes wrong, init goes on with the built-in plans.
  SynthPlans plans;
  std::string skipped;
  try {
    std::string why;
    if (std::optional<synth::Fabric> f = synth::fabricForRanks(*topology_, &why))
      plans = synthesizedPlans(*f, cacheDir);
    else
      skipped = why;
  } catch (const std::exception& e) {
    skipped = e.what();
  }
  // Every rank must run the same plans (processes synthesize on their own; a time budget or a
  // cache can make them differ): keep them only when every rank holds the same.
  std::vector<uint64_t> digests(nranks_);
  digests[rank_] = plans.digest;
  boot.allgather(digests.data(), sizeof(uint64_t));
  for (uint64_t d : digests)
    if (d != digests[0]) {
      if (rank_ == 0)
        WEFT_INFO(INIT, "synthesized plans: not used (ranks synthesized different plans)");
      return;
    }
  if (rank_ != 0) {
    if (plans.library) {
      synthOrigin_ = plans.origin;
      selector_->setSynthesized(plans.library, slotBytes_);
    }
    return;
  }
  if (!skipped.empty()) {
    WEFT_INFO(INIT, "synthesized plans: none (%s)", skipped.c_str());
    return;
  }
  if (!plans.notes.empty()) WEFT_INFO(INIT, "synthesized plans: %s", plans.notes.c_str());
  if (!plans.library) {
    WEFT_INFO(INIT, "synthesized plans: none beats the ring (%s)", plans.origin.c_str());
    return;
  }
  synthOrigin_ = plans.origin;
  selector_->setSynthesized(plans.library, slotBytes_);
  WEFT_INFO(INIT, "synthesized plans from %s:\n%s", plans.origin.c_str(),
            plans.library->describe().c_str());
}

const synth::Fabric& PlanMaker::fabric() {
  std::call_once(fabricOnce_, [this] {
    std::string why;
    if (std::optional<synth::Fabric> f = synth::fabricForRanks(*topology_, &why)) {
      fabric_ = std::make_unique<synth::Fabric>(std::move(*f));
    } else {
      const select::LinkModel model;
      fabric_ = std::make_unique<synth::Fabric>(
          synth::fullyConnectedFabric(nranks_, 1.0 / (model.betaUsPerByte * 1e3), model.alphaUs));
    }
  });
  return *fabric_;
}

double PlanMaker::transferUs(int from, int to, double bytes) {
  const synth::Fabric& f = fabric();
  return f.routeLatencyUs(from, to) + bytes / (f.routeBw(from, to) * 1e3);
}

double PlanMaker::planUs(const plan::Plan& p) { return synth::simulate(p, fabric()).timeUs; }

}  // namespace weft::core
