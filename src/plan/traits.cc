#include "src/plan/traits.h"

namespace weft::plan {

RankTraits rankTraits(const Spec& spec, int rank) {
  RankTraits t;
  const bool rootOnlyInput =
      spec.coll == Collective::kBroadcast || spec.coll == Collective::kScatter;
  t.readsOwnInput = !rootOnlyInput || spec.root == rank;
  t.sentDataStaysPut = spec.coll == Collective::kBroadcast;
  t.reducesIntoWhatItSendsInPlace = spec.coll == Collective::kAllReduce;
  switch (spec.coll) {
    case Collective::kAllReduce:
      t.output = OutputUse::kReducedAndReread;
      break;
    case Collective::kReduceScatter:
    case Collective::kReduce:
      t.output = OutputUse::kReduced;
      break;
    default:
      t.output = OutputUse::kCopied;
      break;
  }
  return t;
}

}  // namespace weft::plan
