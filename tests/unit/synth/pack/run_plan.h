// Runs a Plan for real on host memory: every rank's Program on the host executor, all ranks
// driven from this thread, over in-process slot FIFOs (the local transport's pair blocks).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/plan/plan.h"

namespace weft::synth::test {

// inputs[r] holds rank r's input elements (int32, reduced with sum); returns every rank's
// output, or throws weft::Error with the executor's message. `inPlace` runs with input and
// output aliased as NCCL's in-place rules place them.
std::vector<std::vector<int32_t>> runPlan(const plan::Plan& plan,
                                          const std::vector<std::vector<int32_t>>& inputs,
                                          bool inPlace = false, uint32_t slotBytes = 4096);

}  // namespace weft::synth::test
