// Symbolic verifier: runs every rank's Program of a Plan without data, tracking which ranks'
// input elements each buffer element holds, and checks that the plan is well formed, matches
// sends with receives, cannot deadlock on bounded FIFOs, has no data races between lanes, never
// reads its input after overwriting it (in-place aliasing), and computes its collective.
#pragma once
#include <cstdint>
#include <string>

#include "src/plan/plan.h"

namespace weft::plan {

// Default slot size the executor's FIFOs are modelled with (per sender, receiver, channel).
inline constexpr uint64_t kFifoSlotBytes = 128 * 1024;

struct VerifyOptions {
  // Elements per FIFO slot: a step moves its data in slices of this many elements, and each
  // slice (an empty message too) takes one slot. 0 = kFifoSlotBytes / spec.elemSize.
  uint64_t sliceElems = 0;
  // Slots per FIFO. Two is the least any forwarding ring needs (a lane forwards a slice only
  // when its incoming slot is full and its outgoing FIFO has a free slot).
  int fifoSlots = 2;
};

// Throws weft::Error(kInvalidArgument) naming the rank, lane and step of the first problem.
// Checks out-of-place buffers (unless !plan.outOfPlaceSafe: an in-place-only plan, whose Input
// is the output buffer too) and, when plan.inPlaceSafe, NCCL's in-place aliasing. Time and
// memory grow with the elements of all ranks' buffers (tens of bytes each): meant for tests and
// tools on small counts, not for every plan a communicator builds.
void verify(const Plan& plan, const VerifyOptions& options = {});

// Like verify(), but returns the error message ("" when the plan is correct).
std::string verifyMessage(const Plan& plan, const VerifyOptions& options = {});

}  // namespace weft::plan
