// The cost model: alpha-beta per directed Fabric link with contention. A transfer from rank a to
// rank b follows fabric.routes[a][b]; it moves its bytes at a rate shared max-min fairly with every
// other transfer crossing one of its links, and its data is visible at b the route's latency
// (the sum of its links' latencyUs) after the last byte left a. Latency does not occupy a link:
// a pipelined stream of transfers reaches the link's bandwidth.
//
// Units: bandwidths in GB/s (1e9 bytes per second, as nccl-tests count), times in microseconds,
// so a rate of r GB/s moves r * 1e3 bytes per microsecond.
#pragma once
#include <cstdint>
#include <vector>

#include "synth/model/fabric.h"

namespace weft::synth {

inline constexpr double kBytesPerUsPerGBs = 1e3;

// Time of one transfer of `bytes` from rank a to rank b on an otherwise idle fabric:
// routeLatencyUs(a, b) + bytes / routeBw(a, b). Zero for a == b.
double transferTimeUs(const Fabric& fabric, int a, int b, uint64_t bytes);

// Max-min fair rates (GB/s) of flows sharing directed links: `capacity[l]` is link l's bandwidth,
// `flows[f]` the links flow f crosses (a flow with no links gets `unboundedRate`). Progressive
// filling: the most contended link fixes the rate of its flows, and so on.
std::vector<double> maxMinFairRates(const std::vector<double>& capacity,
                                    const std::vector<std::vector<int>>& flows,
                                    double unboundedRate = 1e12);

// Reusable form of maxMinFairRates for the simulator's hot loop (no allocation per call once
// warmed up). Link ids index `capacity`; flows are given as pointers to their link lists.
class FairShare {
 public:
  explicit FairShare(std::vector<double> capacity) : capacity_(std::move(capacity)) {}
  // Fills rates[i] for flows[i]; `unboundedRate` for flows without links. With `weights`
  // (one per flow, > 0) the filling is weighted: on a shared bottleneck flow i gets
  // weights[i] / (sum of the weights there) of the capacity.
  void compute(const std::vector<const std::vector<int>*>& flows, std::vector<double>& rates,
               double unboundedRate = 1e12, const std::vector<double>* weights = nullptr);
  // Links with at least one flow in the last compute() (for busy-time accounting).
  const std::vector<int>& usedLinks() const { return used_; }

 private:
  std::vector<double> capacity_;
  std::vector<double> left_;    // per link: capacity not yet given out
  std::vector<int> unfixed_;    // per link: flows crossing it whose rate is not fixed
  std::vector<double> weight_;  // per link: summed weight of those flows
  struct HeapEntry {
    double ratio;
    int link;
    uint64_t stamp;
    bool operator>(const HeapEntry& o) const {
      return ratio != o.ratio ? ratio > o.ratio : link > o.link;
    }
  };
  std::vector<HeapEntry> heap_;
  std::vector<uint64_t> stamp_, stampBase_;  // per link: changes; its value at the last push
  std::vector<int> touched_;
  std::vector<int> used_;
  std::vector<std::vector<int>> flowsOn_;  // per link: flow indices
  std::vector<char> fixed_;
};

}  // namespace weft::synth
