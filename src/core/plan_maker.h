// How a communicator makes its plans: the selector set up for its ranks (their hosts and cores,
// the MSCCL plan library, plans synthesized for the topology), and the cost model's time of a
// call on the ranks' fabric. The communicator owns one; the synthesizer and its simulator stay
// behind this interface.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/tuning.h"
#include "src/plan/plan.h"
#include "src/topo/system.h"

namespace weft::select {
class Selector;
}
namespace weft::synth {
struct Fabric;
}
namespace weft::bootstrap {
class Bootstrap;
}

namespace weft::core {

// What init learned that the selector is set up with.
struct PlanMakerSetup {
  int rank = 0;
  int nranks = 1;
  uint64_t slotBytes = 0;            // the communicator's FIFO slot size (rank 0's)
  std::vector<uint64_t> hostHashes;  // every rank's host, by rank
  bool sharedCores = false;          // this host's ranks outnumber the cores they may use
  std::vector<int> coreOf;           // the core each rank of this host runs on (-1: elsewhere)
  uint32_t synthMode = 0;            // rank 0's synthesisMode(), so every rank agrees
};

class PlanMaker {
 public:
  // WEFT_SYNTH as `tuning` gives it (src/core/synth_plans.h): what each rank publishes at init.
  static uint32_t synthesisMode(const Tuning& tuning);

  // Sets up the selector with `tuning` (NCCL_ALGO, the network model, the plan directories).
  // Where the mode turns synthesis on for `topology`, synthesizes plans and keeps them only when
  // every rank holds the same: an allgather through `boot` that every rank takes part in.
  PlanMaker(const PlanMakerSetup& setup, const Tuning& tuning,
            std::shared_ptr<const topo::SystemTopology> topology, bootstrap::Bootstrap& boot);
  ~PlanMaker();
  PlanMaker(const PlanMaker&) = delete;
  PlanMaker& operator=(const PlanMaker&) = delete;

  select::Selector& selector() { return *selector_; }
  // The selector's table of choices, for the init log.
  std::string selectorTable() const;
  // Where the synthesized plans came from ("" when synthesis is off or nothing won).
  const std::string& synthOrigin() const { return synthOrigin_; }

  // The cost model's times in microseconds on the ranks' fabric (from the topology, or where the
  // ranks do not map onto it, every pair linked at the selector's default rate); nothing is
  // executed. transferUs: `bytes` over the route from rank `from` to rank `to`; planUs: plan `p`
  // simulated.
  double transferUs(int from, int to, double bytes);
  double planUs(const plan::Plan& p);

 private:
  void attachSynthesizedPlans(bootstrap::Bootstrap& boot, const std::string& cacheDir);
  const synth::Fabric& fabric();

  int rank_ = 0;
  int nranks_ = 1;
  uint64_t slotBytes_ = 0;
  std::shared_ptr<const topo::SystemTopology> topology_;
  std::unique_ptr<select::Selector> selector_;
  std::string synthOrigin_;
  std::once_flag fabricOnce_;
  std::unique_ptr<synth::Fabric> fabric_;
};

}  // namespace weft::core
