#include "algorithms/registry.h"

#include <string>

#include "algorithms/direct/direct.h"
#include "algorithms/fan/fan.h"
#include "algorithms/hierarchical/hierarchical.h"
#include "algorithms/rhd/rhd.h"
#include "algorithms/ring/ring.h"
#include "algorithms/rsag/rsag.h"
#include "algorithms/tree/tree.h"
#include "src/common/error.h"

namespace weft::algo {

using plan::Collective;

const std::vector<Algorithm>& all() {
  static const std::vector<Algorithm> kAll = {
      {"ring",
       {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
        Collective::kBroadcast, Collective::kReduce},
       buildRing},
      {"tree", {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce}, buildTree},
      {"rhd",
       {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter},
       buildRhd},
      {"direct",
       {Collective::kAlltoAll, Collective::kGather, Collective::kScatter, Collective::kAllGather,
        Collective::kAllReduce, Collective::kReduceScatter, Collective::kReduce,
        Collective::kBroadcast},
       buildDirect},
      {"rsag", {Collective::kAllReduce, Collective::kReduceScatter}, buildRsag},
      {"fan", {Collective::kBroadcast}, buildFan},
      {"hier",
       {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter},
       buildHierarchical},
  };
  return kAll;
}

const Algorithm* find(std::string_view name) {
  for (const Algorithm& a : all())
    if (name == a.name) return &a;
  return nullptr;
}

bool supports(std::string_view name, Collective c) {
  const Algorithm* a = find(name);
  if (!a) return false;
  for (Collective x : a->colls)
    if (x == c) return true;
  return false;
}

plan::Plan build(std::string_view name, const plan::Spec& spec, const Options& options) {
  const Algorithm* a = find(name);
  if (!a) throw Error(Status::kInvalidArgument, "unknown algorithm '" + std::string(name) + "'");
  if (!supports(name, spec.coll))
    throw Error(Status::kInvalidArgument, "algorithm '" + std::string(name) +
                                              "' does not implement " +
                                              plan::collectiveName(spec.coll));
  return a->build(spec, options);
}

}  // namespace weft::algo
