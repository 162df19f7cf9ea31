// The options every Plan generator takes, beside the spec.
#pragma once
#include <cstdint>
#include <vector>

namespace weft::algo {

struct Options {
  int channels = 1;         // lanes (and connection channels) to spread the data over, >= 1
  uint64_t sliceElems = 0;  // pipelining unit for trees / chains; 0 = the algorithm's default
  // Host of each rank (any labels; empty: all ranks on one host). Hierarchical algorithms only.
  std::vector<int> hostOf = {};
  // Fan broadcasts only: the share of the data the root stores into every receiver itself
  // (0: the builder's default, see fan.h).
  double pushShare = 0;
};

}  // namespace weft::algo
