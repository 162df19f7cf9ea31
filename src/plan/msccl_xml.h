// MSCCL algorithm XML (the format MSCCL's and RCCL's executors read) to and from ChunkPlan.
//
// Mapping: <algo> -> ChunkPlan, <gpu id> -> programs[id] (i/o/s_chunks -> input/output/
// scratchChunks), <tb id> -> lanes[id] with channel = chan, <step> -> Step with Op from the
// type (s r rcs rrs rrc rrcs cpy re nop), buffers i/o/s -> kInput/kOutput/kScratch, offsets and
// counts in chunks, the tb's send/recv peers copied onto the steps that send/receive, and
// depid/deps -> a StepRef on the same rank.
//
// Normal form. The XML carries one dependency per step and expresses more as `nop` steps in
// front of the step (what msccl-tools emits and MSCCL's parser folds back). The importer folds
// every nop that no step depends on into the dependency list of the step after it, keeps other
// nops as Op::kNop, reads `rrc` with src == dst as Op::kRecvReduce, and leaves every operand a
// step does not use at its default (peer -1, Ref{}, count 0 for nops). export then import gives
// back exactly any ChunkPlan in that form (every imported plan is), and export is a fixed point:
// exportMsccl(importMsccl(exportMsccl(p))) == exportMsccl(p) for every exportable p.
//
// In-place semantics follow MSCCL: a plan with inplace=1 outofplace=0 treats "i" as the one user
// buffer, so it is instantiated with Plan::outOfPlaceSafe = false: it is correct only for in-place
// calls (input == output, or the rank's slot of the output for allgather). The plan library
// (src/select/plan_library.h) runs such allreduce and allgather plans on the output buffer after
// a copy of the input, which serves out-of-place calls too.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "src/plan/chunk_plan.h"

namespace weft::plan {

// Bounds on what an importer accepts, so a hostile file cannot exhaust memory or time.
struct MscclLimits {
  size_t maxBytes = 32u << 20;          // file size
  int maxRanks = 1024;                  // ngpus
  int maxLanesPerRank = 4096;           // <tb> per <gpu>
  int maxStepsPerLane = 1 << 16;        // <step> per <tb>
  size_t maxElements = 4u << 20;        // elements of the whole document
  uint64_t maxChunksPerLoop = 1 << 20;  // nchunksperloop
  int maxChannels = 1024;               // nchannels
};

// Parses MSCCL XML; throws weft::Error(kInvalidArgument) "<source>:<line>: <element ...>: problem"
// for anything malformed (bad or duplicate ids, unknown types or buffers, peers out of range,
// operands out of bounds, missing or dangling dependencies, dependency cycles, limits).
ChunkPlan importMsccl(std::string_view xml, const std::string& source = "msccl xml",
                      const MscclLimits& limits = {});
// Reads and parses a file (the limits bound the file size before it is read).
ChunkPlan importMscclFile(const std::string& path, const MscclLimits& limits = {});

// Writes MSCCL's "old format" (<step s=...> with every attribute), as msccl-tools' ir_to_xml
// does: hasdep=1 on every step another step depends on, extra dependencies as nop steps, unused
// operands as srcbuf="i" srcoff="-1" / dstbuf="o" dstoff="-1". Rooted collectives get a `root`
// attribute on <algo> (MSCCL ignores unknown attributes). Throws weft::Error(kInvalidArgument)
// when the plan cannot be written: a lane sending to (or receiving from) two peers, extra
// buffers, a collective MSCCL has no name for, or a plan that importMsccl would refuse.
std::string exportMsccl(const ChunkPlan& plan);

// "" when the two plans are equal in every field; else the first difference, for test messages.
std::string chunkPlanDifference(const ChunkPlan& a, const ChunkPlan& b);

// MSCCL's collective names ("allreduce", ...); false for names without a Collective.
bool mscclCollective(std::string_view name, Collective* coll);

}  // namespace weft::plan
