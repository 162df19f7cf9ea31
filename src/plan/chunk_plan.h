// A count-independent Plan: MSCCL's model, where every buffer is cut into equal chunks and steps
// move whole chunks. Imported MSCCL XML and synthesized schedules are ChunkPlans; instantiate()
// turns one into the element-level Plan the executor runs for a given count.
//
// Chunk geometry follows MSCCL: the "loop" buffer of sizeMultiplier * count elements (count is
// the API's per-rank count; sizeMultiplier = nranks for allgather, reducescatter and alltoall, 1
// otherwise) is cut into chunksPerLoop chunks. A rank's input / output / scratch buffers are
// stated in those chunks (inputChunks, outputChunks, scratchChunks).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/plan/plan.h"

namespace weft::plan {

struct ChunkProgram {
  uint64_t inputChunks = 0, outputChunks = 0, scratchChunks = 0;
  // Offsets and counts of every step are in chunks (Step::src/dst offsets, Step::count).
  std::vector<Lane> lanes;
};

struct ChunkPlan {
  std::string name;  // free text (MSCCL <algo name=...>)
  Collective coll = Collective::kAllReduce;
  int32_t nranks = 1;
  int32_t root = 0;
  uint64_t chunksPerLoop = 1;    // MSCCL nchunksperloop
  std::string proto = "Simple";  // MSCCL proto: Simple, LL, LL128 (kept for export)
  bool inPlace = true;           // may be used for in-place calls
  bool outOfPlace = true;        // may be used for out-of-place calls
  uint64_t minBytes = 0;         // selection window [minBytes, maxBytes]; maxBytes 0 = no limit
  uint64_t maxBytes = 0;
  std::vector<ChunkProgram> programs;  // one per rank
};

// nranks for allgather / reducescatter / alltoall, else 1 (MSCCL's sizeMultiplier).
uint64_t sizeMultiplier(Collective coll, int nranks);

// Elements per chunk for an API count, or 0 when `count` cannot be cut into equal chunks
// (sizeMultiplier * count must be a multiple of chunksPerLoop, as MSCCL requires).
uint64_t chunkElems(const ChunkPlan& plan, uint64_t count);

// The element-level Plan for `count` (API count) elements of `elemSize` bytes. Throws
// weft::Error(kInvalidArgument) when chunkElems() is 0 or a program's buffers do not fit the
// spec. The result is named "msccl:<name>" unless `algorithm` is given.
Plan instantiate(const ChunkPlan& plan, uint64_t count, uint32_t elemSize = 4,
                 const std::string& algorithm = "");

}  // namespace weft::plan
