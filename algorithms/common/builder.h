// Helpers shared by the Plan generators: chunking, step constructors, trivial plans.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "algorithms/registry.h"
#include "src/plan/plan.h"

namespace weft::algo {

// Elements per 64-byte boundary (at least 1).
uint64_t alignElems(const plan::Spec& spec);

// The pipelining unit: options.sliceElems, or plan::kFifoSlotBytes worth of elements; rounded
// down to a multiple of alignElems() when it is at least that.
uint64_t sliceElems(const plan::Spec& spec, const Options& options);

// Boundaries of `parts` contiguous pieces of [0, count): offsets[i]..offsets[i+1]. Sizes differ by
// at most one alignment unit (the tail goes to the last piece) and boundaries fall on multiples
// of `align` when count >= parts * align; otherwise sizes differ by at most one element.
std::vector<uint64_t> splitEven(uint64_t count, int parts, uint64_t align);

// Python-style modulo for rank arithmetic.
inline int mod(int a, int n) { return ((a % n) + n) % n; }

inline plan::Ref inRef(uint64_t off) { return {plan::kInput, off}; }
inline plan::Ref outRef(uint64_t off) { return {plan::kOutput, off}; }
inline plan::Ref scratchRef(uint64_t off) { return {plan::kScratch, off}; }

plan::Step sendStep(int to, plan::Ref src, uint64_t n);
plan::Step recvStep(int from, plan::Ref dst, uint64_t n);
plan::Step recvReduceStep(int from, plan::Ref dst, uint64_t n);
plan::Step recvCopySendStep(int from, int to, plan::Ref dst, uint64_t n);
plan::Step recvReduceSendStep(int from, int to, plan::Ref src, uint64_t n);
plan::Step recvReduceCopyStep(int from, plan::Ref src, plan::Ref dst, uint64_t n);
plan::Step recvReduceCopySendStep(int from, int to, plan::Ref src, plan::Ref dst, uint64_t n);
plan::Step copyStep(plan::Ref src, plan::Ref dst, uint64_t n);
// Reduces n elements of src into dst, both local.
plan::Step reduceStep(plan::Ref src, plan::Ref dst, uint64_t n);

// Adds a lane on `channel`; returns its index. The lane-list forms serve plan::ChunkProgram too.
int addLane(std::vector<plan::Lane>& lanes, int channel);
inline int addLane(plan::Program& p, int channel) { return addLane(p.lanes, channel); }
// Appends `s` to lane `lane`; returns where it went.
plan::StepRef addStep(std::vector<plan::Lane>& lanes, int lane, plan::Step s);
inline plan::StepRef addStep(plan::Program& p, int lane, plan::Step s) {
  return addStep(p.lanes, lane, std::move(s));
}

// Throws weft::Error(kInvalidArgument) for a spec no generator can build (bad nranks, root,
// elemSize or channel count).
void checkSpec(const plan::Spec& spec, const Options& options);

// A plan with a Program (no lanes) for every rank.
plan::Plan emptyPlan(const plan::Spec& spec, const char* algorithm);

// nranks == 1 or count == 0: copies the rank's count elements from input to output, or nothing.
// Returns false (and leaves `plan` alone) when the spec needs a real algorithm.
bool trivialPlan(const plan::Spec& spec, const char* algorithm, plan::Plan* plan);

}  // namespace weft::algo
