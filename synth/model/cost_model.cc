#include "synth/model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace weft::synth {

double transferTimeUs(const Fabric& fabric, int a, int b, uint64_t bytes) {
  if (a == b) return 0;
  return fabric.routeLatencyUs(a, b) +
         static_cast<double>(bytes) / (fabric.routeBw(a, b) * kBytesPerUsPerGBs);
}

std::vector<double> maxMinFairRates(const std::vector<double>& capacity,
                                    const std::vector<std::vector<int>>& flows,
                                    double unboundedRate) {
  FairShare share(capacity);
  std::vector<const std::vector<int>*> ptrs;
  for (const auto& f : flows) ptrs.push_back(&f);
  std::vector<double> rates;
  share.compute(ptrs, rates, unboundedRate);
  return rates;
}

void FairShare::compute(const std::vector<const std::vector<int>*>& flows,
                        std::vector<double>& rates, double unboundedRate,
                        const std::vector<double>* weights) {
  const size_t nlinks = capacity_.size();
  if (left_.size() != nlinks) {
    left_.assign(nlinks, 0);
    unfixed_.assign(nlinks, 0);
    weight_.assign(nlinks, 0);
    stamp_.assign(nlinks, 0);
    stampBase_.assign(nlinks, 0);
    flowsOn_.assign(nlinks, {});
  }
  for (int l : used_) {
    unfixed_[l] = 0;
    weight_[l] = 0;
    flowsOn_[l].clear();
  }
  used_.clear();
  rates.assign(flows.size(), unboundedRate);
  fixed_.assign(flows.size(), 0);
  auto w = [&](size_t f) { return weights ? (*weights)[f] : 1.0; };
  size_t open = 0;
  for (size_t f = 0; f < flows.size(); ++f) {
    if (flows[f]->empty()) {
      fixed_[f] = 1;
      continue;
    }
    ++open;
    for (int l : *flows[f]) {
      if (unfixed_[l]++ == 0) {
        used_.push_back(l);
        left_[l] = capacity_[l];
      }
      weight_[l] += w(f);
      flowsOn_[l].push_back(static_cast<int>(f));
    }
  }
  // Progressive filling: the link with the least capacity per unit of unfixed weight saturates
  // first; its flows get that share times their weight, which is taken from every other link
  // they cross. Links come off a heap keyed by that ratio (stale entries skipped), so a
  // computation costs O(route links x log) rather than a scan of the links per level. The
  // shares never fall from one link to the next (ties settle at the same share).
  heap_.clear();
  for (int l : used_) heap_.push_back({left_[l] / weight_[l], l, stamp_[l]});
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
  double level = 0;
  while (open > 0 && !heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    const HeapEntry top = heap_.back();
    heap_.pop_back();
    const int best = top.link;
    if (top.stamp != stamp_[best] || unfixed_[best] == 0) continue;
    level = std::max(level, top.ratio);
    const double share = level;
    touched_.clear();
    for (int f : flowsOn_[best]) {
      if (fixed_[f]) continue;
      fixed_[f] = 1;
      rates[f] = share * w(f);
      --open;
      for (int l : *flows[f]) {
        left_[l] -= rates[f];
        weight_[l] -= w(f);
        if (--unfixed_[l] == 0) weight_[l] = 0;
        if (stamp_[l]++ == stampBase_[l]) touched_.push_back(l);
      }
    }
    for (int l : touched_) {
      stampBase_[l] = stamp_[l];
      if (unfixed_[l] > 0 && l != best) {
        heap_.push_back({std::max(0.0, left_[l]) / weight_[l], l, stamp_[l]});
        std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
      }
    }
  }
}

}  // namespace weft::synth
