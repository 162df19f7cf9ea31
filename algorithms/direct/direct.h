// Direct (pairwise) algorithms: every rank talks to every peer itself. Alltoall and allgather
// go round k = 1..n-1 sending to rank + k and receiving from rank - k on separate lanes; gather
// and scatter move every block straight to or from the root; allreduce sends every input to
// every rank, which sums them in rank order (one round trip: the small-message choice).
#pragma once
#include "algorithms/common/options.h"
#include "src/plan/plan.h"

namespace weft::algo {

plan::Plan buildDirect(const plan::Spec& spec, const Options& options);

}  // namespace weft::algo
