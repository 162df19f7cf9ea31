// Recursive halving-doubling: allreduce as a reduce-scatter by recursive halving followed by an
// allgather by recursive doubling (Rabenseifner), and the two halves on their own as
// reducescatter and allgather. For rank counts that are not a power of two, the first
// 2 * (n - p) ranks pair up (p = largest power of two <= n): the even rank of each pair hands its
// data to the odd one, which takes part for both, and gets the result back at the end.
#pragma once
#include "algorithms/common/options.h"
#include "src/plan/plan.h"

namespace weft::algo {

plan::Plan buildRhd(const plan::Spec& spec, const Options& options);

}  // namespace weft::algo
