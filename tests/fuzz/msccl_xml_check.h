// The property both the libFuzzer target and the replay program check on one input: importing
// MSCCL XML either fails with a weft::Error or gives a ChunkPlan that exports, imports back equal,
// exports identically again, and instantiates (and, when small, verifies without crashing: a
// well-formed file may still compute the wrong thing). Anything else (a crash, another exception,
// a round trip that changes the plan) is a bug.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <string_view>

#include "src/common/error.h"
#include "src/plan/chunk_plan.h"
#include "src/plan/msccl_xml.h"
#include "src/plan/verifier.h"

namespace weft::fuzz {

[[noreturn]] inline void mscclPropertyFailed(const std::string& what, std::string_view input) {
  std::fprintf(stderr, "MSCCL XML property violated: %s\ninput (%zu bytes):\n%.*s\n", what.c_str(),
               input.size(), static_cast<int>(std::min<size_t>(input.size(), 4096)), input.data());
  std::abort();
}

// Returns true when the input was a plan (false: refused with a weft::Error).
inline bool checkMscclXml(std::string_view input) {
  plan::MscclLimits limits;
  limits.maxBytes = 1u << 20;
  limits.maxElements = 50000;
  limits.maxRanks = 64;
  limits.maxLanesPerRank = 256;
  limits.maxStepsPerLane = 1024;
  limits.maxChunksPerLoop = 4096;
  plan::ChunkPlan p;
  try {
    p = plan::importMsccl(input, "fuzz", limits);
  } catch (const Error&) {
    return false;
  }
  std::string x;
  try {
    x = plan::exportMsccl(p);
  } catch (const Error& e) {
    mscclPropertyFailed(std::string("imported plan does not export: ") + e.what(), input);
  }
  plan::ChunkPlan back;
  try {
    back = plan::importMsccl(x, "exported");
  } catch (const Error& e) {
    mscclPropertyFailed(std::string("exported XML does not import: ") + e.what() + "\n" + x, input);
  }
  std::string d = plan::chunkPlanDifference(p, back);
  if (!d.empty()) mscclPropertyFailed("round trip changed the plan: " + d + "\n" + x, input);
  if (plan::exportMsccl(back) != x) mscclPropertyFailed("export is not a fixed point\n" + x, input);
  // The smallest count that splits into equal chunks.
  const uint64_t mult = plan::sizeMultiplier(p.coll, p.nranks);
  const uint64_t count = p.chunksPerLoop / std::gcd(p.chunksPerLoop, mult);
  try {
    plan::Plan inst = plan::instantiate(p, count);
    uint64_t elements = 0, steps = 0;
    for (int r = 0; r < p.nranks; ++r) {
      const plan::BufferSizes b = plan::bufferSizes(inst.spec, r);
      elements += b.input + b.output + inst.programs[r].scratchElems;
      for (const auto& lane : inst.programs[r].lanes) steps += lane.steps.size();
    }
    if (elements <= 4096 && steps <= 20000) (void)plan::verifyMessage(inst);
  } catch (const Error&) {
    // Buffers larger than the collective's: refused by instantiate, as it should.
  }
  return true;
}

}  // namespace weft::fuzz
