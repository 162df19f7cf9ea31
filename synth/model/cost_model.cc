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
                        std::vector<double>& rates, double unboundedRate) {
  const size_t nlinks = capacity_.size();
  if (left_.size() != nlinks) {
    left_.assign(nlinks, 0);
    unfixed_.assign(nlinks, 0);
    flowsOn_.assign(nlinks, {});
  }
  for (int l : used_) {
    unfixed_[l] = 0;
    flowsOn_[l].clear();
  }
  used_.clear();
  rates.assign(flows.size(), unboundedRate);
  fixed_.assign(flows.size(), 0);
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
      flowsOn_[l].push_back(static_cast<int>(f));
    }
  }
  // Progressive filling: the links with the least capacity per unfixed flow saturate first;
  // their flows get that share, which is taken from every other link they cross. Links tied at
  // the least share stay tied as their flows are fixed, so all of them are settled in one pass.
  while (open > 0) {
    double share = std::numeric_limits<double>::infinity();
    for (int l : used_)
      if (unfixed_[l] > 0) share = std::min(share, left_[l] / unfixed_[l]);
    if (share == std::numeric_limits<double>::infinity()) break;
    const double tie = share + std::abs(share) * 1e-12;
    share = std::max(0.0, share);
    for (int best : used_) {
      if (unfixed_[best] == 0 || left_[best] / unfixed_[best] > tie) continue;
      for (int f : flowsOn_[best]) {
        if (fixed_[f]) continue;
        fixed_[f] = 1;
        rates[f] = share;
        --open;
        for (int l : *flows[f]) {
          left_[l] -= share;
          --unfixed_[l];
        }
      }
    }
  }
}

}  // namespace weft::synth
