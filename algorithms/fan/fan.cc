#include "algorithms/fan/fan.h"

#include <algorithm>

#include "algorithms/common/builder.h"
#include "src/common/error.h"

namespace weft::algo {
namespace {

using plan::Collective;
using plan::Plan;
using plan::Program;
using plan::Spec;

// Channels: the pushed part's lanes and the read part's, which run side by side.
constexpr int kPushChannel = 0, kReadChannel = 1;

// Without Options::pushShare: the even split of 4 ranks on 2 cores, where the root shares its
// core with one receiver and the other core holds two (Selector::fanShare).
constexpr double kDefaultPushShare = 1.0 / 3;

Plan broadcast(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "fan");
  const int n = spec.nranks, root = spec.root;
  const uint64_t cnt = spec.count, slice = sliceElems(spec, o);
  const double share = std::clamp(o.pushShare > 0 ? o.pushShare : kDefaultPushShare, 0.0, 1.0);
  // The pushed part ends on a slice boundary (so both sides cut it alike) unless it is all.
  uint64_t pushed = static_cast<uint64_t>(static_cast<double>(cnt) * share);
  pushed = pushed >= cnt ? cnt : pushed / slice * slice;
  // One range on one lane: the root copies it to every peer in turn, then to its own output;
  // a receiver takes it in slices of `step` (the root's steps, so both sides cut it alike).
  auto range = [&](Program& p, int r, int lane, uint64_t from, uint64_t to, uint64_t step) {
    for (uint64_t off = from; off < to; off += step) {
      const uint64_t len = std::min(step, to - off);
      if (r != root) {
        addStep(p, lane, recvStep(root, outRef(off), len));
        continue;
      }
      for (int k = 1; k < n; ++k) addStep(p, lane, sendStep(mod(root + k, n), inRef(off), len));
      addStep(p, lane, copyStep(inRef(off), outRef(off), len));
    }
  };
  for (int r = 0; r < n; ++r) {
    Program& p = plan.programs[r];
    if (pushed > 0) {
      const int lane = addLane(p, kPushChannel);
      p.lanes[lane].push = r == root;
      range(p, r, lane, 0, pushed, slice);  // slice by slice: each read once for every copy
    }
    if (pushed < cnt) range(p, r, addLane(p, kReadChannel), pushed, cnt, cnt - pushed);
  }
  return plan;
}

}  // namespace

Plan buildFan(const Spec& spec, const Options& options) {
  checkSpec(spec, options);
  Plan plan;
  if (trivialPlan(spec, "fan", &plan)) return plan;
  if (spec.coll != Collective::kBroadcast)
    throw Error(Status::kInvalidArgument, "fan builds broadcasts only");
  return broadcast(spec, options);
}

}  // namespace weft::algo
