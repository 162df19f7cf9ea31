// Integer shares of a whole proportional to real weights (largest remainder), used to turn ring
// and tree bandwidths into whole chunk counts.
#pragma once
#include <cstdint>
#include <vector>

namespace weft::synth {

// `total` split into integers proportional to `weights` (non-negative, not all zero); the shares
// sum to `total`. Throws weft::Error(kInvalidArgument) on negative or all-zero weights.
std::vector<uint64_t> apportion(const std::vector<double>& weights, uint64_t total);

// How well integer `shares` serve `weights`: (sum shares / sum weights) / max_i(shares_i /
// weights_i), i.e. the fraction of the ideal rate kept when share i runs at rate weights_i.
double apportionEfficiency(const std::vector<double>& weights, const std::vector<uint64_t>& shares);

// The smallest total in [1, maxTotal] whose apportionment keeps at least `target` efficiency,
// else the total with the best efficiency.
uint64_t chooseTotal(const std::vector<double>& weights, uint64_t maxTotal, double target);

}  // namespace weft::synth
