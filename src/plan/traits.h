// What a plan does with a rank's buffers, in the terms the executor's policies need: whether the
// rank reads its input, whether what it sends stays put, how its output is produced and reused.
// The executor decides transfer modes and store kinds from these (src/exec/lower.cc) and never
// asks which collective a plan computes; the collective's semantics live here, with the IR.
#pragma once
#include "src/plan/plan.h"

namespace weft::plan {

// How a rank's output comes about, which decides whether writing it past the caches pays.
enum class OutputUse {
  kCopied,            // moved from peers (allgather, broadcast, alltoall, gather, scatter)
  kReduced,           // reduced, and left for the caller (reduce-scatter, reduce)
  kReducedAndReread,  // reduced, and read again by peers within the call (allreduce's blocks)
};

struct RankTraits {
  // Some step of the rank reads its input: a broadcast's or scatter's non-root reads none.
  bool readsOwnInput = true;
  // No rank writes a region after it has sent from it, whatever the buffers' aliasing: a
  // broadcast's ranks write each element once, from what they receive, and its root writes
  // nothing. Elsewhere only disjoint input and output guarantee it.
  bool sentDataStaysPut = false;
  // In place, the rank reduces into the very buffer its earlier messages named (an allreduce):
  // a reader of such a message must finish before the rank goes on.
  bool reducesIntoWhatItSendsInPlace = false;
  OutputUse output = OutputUse::kCopied;
};

RankTraits rankTraits(const Spec& spec, int rank);

}  // namespace weft::plan
