#include "synth/search/apportion.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/common/error.h"

namespace weft::synth {

std::vector<uint64_t> apportion(const std::vector<double>& weights, uint64_t total) {
  double sum = 0;
  for (double w : weights) {
    if (!(w >= 0)) throw Error(Status::kInvalidArgument, "apportion: negative or NaN weight");
    sum += w;
  }
  if (sum <= 0) throw Error(Status::kInvalidArgument, "apportion: all weights are zero");
  std::vector<uint64_t> shares(weights.size());
  std::vector<std::pair<double, size_t>> rest;
  uint64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double exact = weights[i] / sum * static_cast<double>(total);
    shares[i] = static_cast<uint64_t>(std::floor(exact));
    given += shares[i];
    rest.push_back({exact - std::floor(exact), i});
  }
  // Largest remainders first; ties go to the heavier weight, then the lower index.
  std::sort(rest.begin(), rest.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    if (weights[a.second] != weights[b.second]) return weights[a.second] > weights[b.second];
    return a.second < b.second;
  });
  for (size_t k = 0; given < total; ++k, ++given) ++shares[rest[k % rest.size()].second];
  return shares;
}

double apportionEfficiency(const std::vector<double>& weights,
                           const std::vector<uint64_t>& shares) {
  double wsum = 0, worst = 0;
  uint64_t ssum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    wsum += weights[i];
    ssum += shares[i];
    if (shares[i] == 0) continue;
    if (weights[i] <= 0) return 0;
    worst = std::max(worst, static_cast<double>(shares[i]) / weights[i]);
  }
  if (ssum == 0 || worst == 0) return 0;
  return (static_cast<double>(ssum) / wsum) / worst;
}

uint64_t chooseTotal(const std::vector<double>& weights, uint64_t maxTotal, double target) {
  uint64_t best = 1;
  double bestEff = -1;
  for (uint64_t t = 1; t <= std::max<uint64_t>(1, maxTotal); ++t) {
    const double eff = apportionEfficiency(weights, apportion(weights, t));
    if (eff >= target) return t;
    if (eff > bestEff + 1e-12) {
      bestEff = eff;
      best = t;
    }
  }
  return best;
}

}  // namespace weft::synth
