#include "algorithms/fan/fan.h"

#include <algorithm>

#include "algorithms/common/builder.h"

namespace weft::algo {
namespace {

// Channels: the pushed part's lanes and the read part's, which run side by side.
constexpr int kPushChannel = 0, kReadChannel = 1;

// Without Options::pushShare: the even split of 4 ranks on 2 cores, where the root shares its
// core with one receiver and the other core holds two (Selector::fanShare).
constexpr double kDefaultPushShare = 1.0 / 3;

Plan broadcast(const Spec& spec, const Options& o) {
  const int n = spec.nranks, root = spec.root;
  const uint64_t cnt = spec.count, slice = sliceElems(spec, o);
  const double share = std::clamp(o.pushShare > 0 ? o.pushShare : kDefaultPushShare, 0.0, 1.0);
  // The pushed part ends on a slice boundary (so both sides cut it alike) unless it is all.
  uint64_t pushed = static_cast<uint64_t>(static_cast<double>(cnt) * share);
  pushed = pushed >= cnt ? cnt : pushed / slice * slice;
  // One range on one lane: the root copies it to every peer in turn, then to its own output;
  // a receiver takes it in slices of `step` (the root's steps, so both sides cut it alike).
  auto range = [&](Program& p, int r, int lane, uint64_t from, uint64_t to, uint64_t step) {
    forEachSlice(from, to, step, [&](uint64_t off, uint64_t len) {
      if (r != root) {
        addStep(p, lane, recvStep(root, outRef(off), len));
        return;
      }
      for (int k = 1; k < n; ++k) addStep(p, lane, sendStep(mod(root + k, n), inRef(off), len));
      addStep(p, lane, copyStep(inRef(off), outRef(off), len));
    });
  };
  return eachRank(spec, "fan", [&](Program& p, int r) {
    if (pushed > 0) {
      const int lane = addLane(p, kPushChannel);
      p.lanes[lane].push = r == root;
      range(p, r, lane, 0, pushed, slice);  // slice by slice: each read once for every copy
    }
    if (pushed < cnt) range(p, r, addLane(p, kReadChannel), pushed, cnt, kWholeRange);
  });
}

}  // namespace

Plan buildFan(const Spec& spec, const Options& options) {
  return buildCollective("fan", spec, options, {{Collective::kBroadcast, broadcast}});
}

}  // namespace weft::algo
