// Chooses an algorithm per (collective, size) by synth/model's closed-form alpha-beta costs
// (synth/model/alpha_beta.h), corrected where this machine's measurements overrule them by the one
// table in src/select/corrections.h, unless NCCL_ALGO / WEFT_ALGO says otherwise.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "src/plan/plan.h"
#include "src/select/corrections.h"
#include "src/select/plan_library.h"
#include "synth/model/alpha_beta.h"

namespace weft::select {

struct Choice {
  std::string algorithm;  // a built-in algorithm's name, or "msccl:<plan name>#<library id>"
  algo::Options options;
  // A plan library entry to instantiate instead of building `algorithm`.
  std::shared_ptr<const plan::ChunkPlan> chunkPlan;
  std::string chunkPlanSource;
  // Run the library plan in slot-sized pieces where its messages exceed a slot (plan_library.h).
  bool pieces = false;
};

// What the selector needs to know about a call beyond its Spec.
struct CallTraits {
  bool inPlace = false;      // buffers alias as NCCL's in-place rules say
  bool scalesInput = false;  // PreMulSum (or float Avg): reads of the input are scaled
};

// The name NCCL_ALGO uses for plan library entries (MSCCL XML files, plans added in code).
inline constexpr const char* kLibraryAlgorithm = "msccl";
// The name NCCL_ALGO uses for the plans synthesized for the communicator's topology at init.
inline constexpr const char* kSynthAlgorithm = "synth";

// Parsed NCCL_ALGO: "ring", "ring,tree", "^tree", "allreduce:tree;broadcast:ring".
class AlgoFilter {
 public:
  explicit AlgoFilter(const std::string& text = "");
  bool allows(plan::Collective c, const std::string& algorithm) const;
  bool restricts(plan::Collective c) const;
  const std::string& text() const { return text_; }  // as NCCL_ALGO gave it

 private:
  struct Rule {
    bool allCollectives = true;
    plan::Collective coll = plan::Collective::kAllReduce;
    bool exclude = false;
    std::vector<std::string> names;
  };
  std::vector<Rule> rules_;
  std::string text_;
};

// One candidate's cost for a call: what synth/model says, and after the correction table's rows.
struct Score {
  Algorithm algorithm = Algorithm::kRing;
  double modelUs = 0;   // the closed form's time (infinity: the algorithm cannot build the call)
  double us = 0;        // corrected: the time the choice compares
  int corrections = 0;  // rows of kCorrections that applied
};

struct LinkModel {
  double alphaUs = 1.0;  // per message step
  // Per byte: 1 / (the link's rate in bytes per us). The default is a round model rate, not this
  // machine's: a message step costs as much as moving 8000 bytes. The selector compares the
  // algorithms' relative costs under it; where measurements disagree, src/select/corrections.h
  // overrules (see perf/README.md, "The selector's default link model").
  double betaUsPerByte = 1.0 / 8000.0;
};

class Selector {
 public:
  Selector(int nranks, LinkModel model, AlgoFilter filter);
  Choice choose(const plan::Spec& spec) const { return choose(spec, CallTraits{}); }
  // A library plan when one matches the call (and NCCL_ALGO allows "msccl"): without a
  // predicted cost it is taken as is (MSCCL's rule for loaded files), with one only when it beats
  // the best built-in algorithm's prediction. Otherwise the best built-in algorithm, unless
  // NCCL_ALGO allows only library plans ("msccl", "synth") for the collective: then, like NCCL
  // with a forced algorithm it cannot use, throws weft::Error(kInvalidUsage) saying why.
  Choice choose(const plan::Spec& spec, const CallTraits& call) const;
  // Plans to offer; `slotBytes` is the FIFO slot of the communicator (see plan_library.h).
  void setLibrary(std::shared_ptr<const PlanLibrary> library, uint64_t slotBytes);
  // Plans synthesized for this communicator's topology (NCCL_ALGO name "synth"). Each carries
  // the byte window where the synthesizer's simulation found it faster than the built-in ring
  // on the fabric, a finer model than this selector's, so a match inside its window is taken
  // (after MSCCL files without a predicted cost, which always win where they match).
  void setSynthesized(std::shared_ptr<const PlanLibrary> library, uint64_t slotBytes);
  bool hasSynthesized() const { return synth_ && !synth_->empty(); }
  // Ranks span hosts: `hostOf` labels each rank's host; `net` models one hop between hosts (the
  // constructor's model stays the link inside a host). Enables the hierarchical algorithms.
  void setHosts(const std::vector<int>& hostOf, LinkModel net);
  // A host's ranks outnumber its cores (they take turns on them).
  void setSharedCores(bool shared) { sharedCores_ = shared; }
  // The core each rank of this host runs on, by rank (-1: another host or unknown), as the
  // communicator places them.
  void setCores(std::vector<int> coreOfRank) { coreOf_ = std::move(coreOfRank); }
  // The share of a large broadcast from `root` its root should push itself ("fan"): where ranks
  // take turns on the cores and the root's core carries at most half as many receivers as
  // another core, the root's pushing evens out the cores' work. 0 where it should not.
  double fanShare(int root) const;
  // Predicted time of `algorithm` in microseconds (infinity if unsupported).
  double predictUs(const std::string& algorithm, const plan::Spec& spec,
                   const CallTraits& call = {}) const;
  Score score(Algorithm algorithm, const plan::Spec& spec, const CallTraits& call = {}) const;
  // Printable score table (NCCL_DEBUG=INFO, TUNING): per collective and size, every candidate's
  // modelled and corrected time and the pick; then the plan libraries.
  std::string table() const;

 private:
  bool applies(const Window& w, const plan::Spec& spec, const CallTraits& call) const;

  int nranks_;
  LinkModel model_;
  AlgoFilter filter_;
  std::vector<int> hostOf_;  // empty: one host
  int hosts_ = 1, maxLocal_ = 1;
  bool sharedCores_ = false;
  std::vector<int> coreOf_;
  LinkModel net_;
  synth::AlphaBetaView view_;  // what synth/model's closed forms see: model_ and net_ by host
  // The registry's algorithms in its order (ties go to the earlier), with their ids.
  std::vector<std::pair<const algo::Algorithm*, Algorithm>> candidates_;
  std::shared_ptr<const PlanLibrary> library_;
  std::shared_ptr<const PlanLibrary> synth_;
  uint64_t slotBytes_ = 128 * 1024;
};

// Normalises user spellings: "Ring" -> "ring", "halvingdoubling" -> "rhd", ...
std::string canonicalAlgorithm(const std::string& name);

}  // namespace weft::select
