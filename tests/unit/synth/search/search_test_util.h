// Shared by the search and pack tests: the reference machines as fabrics, and verification of a
// ChunkPlan at several counts.
#pragma once
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "src/plan/chunk_plan.h"
#include "src/plan/verifier.h"
#include "src/topo/xml_reader.h"
#include "synth/model/fabric.h"

namespace weft::synth::test {

inline Fabric goldenFabric(const std::string& name, const FabricOptions& options = {}) {
  return fabricFromTopology(topo::readTopologyFile(std::string(WEFT_SOURCE_DIR) +
                                                   "/tests/golden/topologies/" + name + ".xml"),
                            options);
}

// The smallest API count the plan splits into whole chunks.
inline uint64_t baseCount(const plan::ChunkPlan& cp) {
  const uint64_t m = plan::sizeMultiplier(cp.coll, cp.nranks);
  return cp.chunksPerLoop / std::gcd(cp.chunksPerLoop, m);
}

// Instantiates the plan at 1x, 2x and 5x its base count and runs the verifier (out of place and,
// when the plan allows it, in place) with small slices so every step is pipelined over several
// FIFO slots. Returns "" or the first failure.
inline std::string verifyAtCounts(const plan::ChunkPlan& cp,
                                  std::vector<uint64_t> mult = {1, 2, 5}) {
  for (uint64_t k : mult) {
    const uint64_t count = baseCount(cp) * k;
    plan::VerifyOptions vo;
    vo.sliceElems = 1 + k;
    try {
      plan::verify(plan::instantiate(cp, count), vo);
    } catch (const std::exception& e) {
      return cp.name + " count " + std::to_string(count) + ": " + e.what();
    }
  }
  return "";
}

}  // namespace weft::synth::test
