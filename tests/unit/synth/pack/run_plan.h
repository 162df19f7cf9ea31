// Runs a Plan for real on host memory: every rank's Program on the host executor, all ranks
// driven from this thread, over in-process slot FIFOs (the local transport's pair blocks).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/plan/chunk_plan.h"
#include "src/plan/plan.h"

namespace weft::synth::test {

// inputs[r] holds rank r's input elements (int32, reduced with sum); returns every rank's
// output, or throws weft::Error with the executor's message. `inPlace` runs with input and
// output aliased as NCCL's in-place rules place them.
std::vector<std::vector<int32_t>> runPlan(const plan::Plan& plan,
                                          const std::vector<std::vector<int32_t>>& inputs,
                                          bool inPlace = false, uint32_t slotBytes = 4096);

// Instantiates `cp` at `count`, runs it out of place (and in place where cp.inPlace) on inputs
// with a distinct value per rank and element, and checks every output element against the
// collective's result (a reduce only at its root). Returns "" or the first wrong element.
std::string runAndCheck(const plan::ChunkPlan& cp, uint64_t count);

}  // namespace weft::synth::test
