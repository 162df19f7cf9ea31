// Fan broadcast, for ranks that share one host's memory: the root stores the first part of its
// data (Options::pushShare) into every receiver itself, a slice to each in turn
// (plan::Lane::push), so it reads each slice once and writes every copy while the slice is in
// its cache; meanwhile the receivers read the rest from the root's memory themselves. A direct
// broadcast leaves the root's core to the receivers that share it, and where ranks take turns
// on the cores that core may carry fewer receivers than another (4 ranks on 2 cores: the root
// and one receiver, then two): the pushed part moves that work onto the root, and moves less
// memory too (one read and n - 1 writes, where the receivers make n - 1 of each).
#pragma once
#include "algorithms/common/options.h"
#include "src/plan/plan.h"

namespace weft::algo {

plan::Plan buildFan(const plan::Spec& spec, const Options& options);

}  // namespace weft::algo
