// Algorithms are pure Plan generators, registered by name.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/common/options.h"
#include "algorithms/p2p/p2p.h"  // the point-to-point groups, built beside the collectives
#include "src/plan/plan.h"

namespace weft::algo {

using Generator = plan::Plan (*)(const plan::Spec&, const Options&);

struct Algorithm {
  const char* name;                     // "ring", "tree", "rhd", "direct"
  std::vector<plan::Collective> colls;  // collectives it can build
  Generator build;
};

const std::vector<Algorithm>& all();
const Algorithm* find(std::string_view name);  // nullptr if unknown
bool supports(std::string_view name, plan::Collective c);

// Builds a plan; throws weft::Error(kInvalidArgument) if the algorithm does not support the spec.
plan::Plan build(std::string_view name, const plan::Spec& spec, const Options& options = {});

}  // namespace weft::algo
