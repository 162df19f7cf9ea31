// SCCL's non-combining collectives as chunk pre/postconditions: every chunk starts at one rank
// and must reach a set of ranks. `chunks` (SCCL's C) cuts each rank's share into that many
// pieces, so an allgather on N ranks moves N*C chunks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/plan/plan.h"

namespace weft::synth::solver {

struct CollectiveSpec {
  plan::Collective coll = plan::Collective::kAllGather;  // allgather, alltoall or broadcast
  int root = 0;                                          // broadcast only
};

// One chunk of an instance and where it lives in the MSCCL chunk geometry (chunk_plan.h).
struct ChunkInfo {
  int source = 0;                 // the rank holding it at the start
  std::vector<int> destinations;  // ranks other than `source` that must end up with it
  uint64_t inputOffset = 0;       // in the source's input buffer, in chunks
  uint64_t outputOffset = 0;      // in every destination's output buffer, in chunks
  bool sourceOutput = false;      // the source's output must hold it too (a local copy)
};

struct Instance {
  CollectiveSpec spec;
  int nranks = 0;
  int chunks = 1;                              // C: pieces per rank's share
  uint64_t chunksPerLoop = 1;                  // MSCCL nchunksperloop of the lowered plan
  uint64_t inputChunks = 0, outputChunks = 0;  // per rank (broadcast: the same on every rank)
  std::vector<ChunkInfo> chunkInfo;
};

// Throws weft::Error(kInvalidArgument) for an unsupported collective, chunks < 1, nranks < 2 or
// a root that is not a rank.
Instance makeInstance(const CollectiveSpec& spec, int nranks, int chunks);

std::string describe(const CollectiveSpec& spec);

// The chunk that rank permutation `perm` maps chunk k to (perm[r]: the image of rank r), or -1
// when the permutation does not preserve the collective (a broadcast whose root moves).
int mapChunk(const Instance& instance, const std::vector<int>& perm,
             int k);  // "allgather", "broadcast(root=2)", ...

}  // namespace weft::synth::solver
