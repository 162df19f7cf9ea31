// Algorithms are pure Plan generators, registered by name.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "src/plan/plan.h"

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

using Generator = plan::Plan (*)(const plan::Spec&, const Options&);

struct Algorithm {
  const char* name;                     // "ring", "tree", "rhd", "direct"
  std::vector<plan::Collective> colls;  // collectives it can build
  Generator build;
};

const std::vector<Algorithm>& all();
const Algorithm* find(std::string_view name);  // nullptr if unknown
bool supports(std::string_view name, plan::Collective c);

// Builds a plan; throws weft::Error(kInvalidArgument) if the algorithm does not support the spec.
plan::Plan build(std::string_view name, const plan::Spec& spec, const Options& options = {});

// One point-to-point operation of a group, on buffer plan::kExtra + bufferIndex.
struct P2pOp {
  bool send = true;
  int peer = 0;
  uint64_t count = 0;  // elements
  uint16_t bufferIndex = 0;
};

// The Program of `rank` for a group of sends and receives: operations with one peer and one
// direction keep their order (NCCL semantics); self send/recv pairs become copies.
plan::Program p2pProgram(int rank, int nranks, const std::vector<P2pOp>& ops);

}  // namespace weft::algo
