// Helpers shared by the Plan generators: chunking, step constructors, the walks over ranks,
// channel parts and slices, trivial plans, and the dispatch on the collective.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

#include "algorithms/common/options.h"
#include "src/plan/plan.h"

namespace weft::algo {

// The generators name the Plan types without their namespace.
using plan::Collective;
using plan::Plan;
using plan::Program;
using plan::Ref;
using plan::Spec;
using plan::Step;
using plan::StepRef;

// Elements per 64-byte boundary (at least 1).
uint64_t alignElems(const plan::Spec& spec);

// The pipelining unit: options.sliceElems, or plan::kFifoSlotBytes worth of elements; rounded
// down to a multiple of alignElems() when it is at least that.
uint64_t sliceElems(const plan::Spec& spec, const Options& options);

// The message size of ring steps: every rank of a ring sends before it receives, so each message
// must fit its FIFO with a slot to spare; ring steps move at most one FIFO slot's worth
// (sliceElems() when that is less), and the data loops over the ring in rounds.
uint64_t ringChunk(const plan::Spec& spec, const Options& options);

// Boundaries of `parts` contiguous pieces of [0, count): offsets[i]..offsets[i+1]. Sizes differ by
// at most one alignment unit (the tail goes to the last piece) and boundaries fall on multiples
// of `align` when count >= parts * align; otherwise sizes differ by at most one element.
std::vector<uint64_t> splitEven(uint64_t count, int parts, uint64_t align);

// A non-empty piece of the data that one channel carries: elements [begin, end).
struct ChannelPart {
  int channel;
  uint64_t begin, end;
  uint64_t len() const { return end - begin; }
};
// splitEven(spec.count, options.channels, alignElems(spec)) as parts, the empty ones left out.
std::vector<ChannelPart> channelParts(const plan::Spec& spec, const Options& options);

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

// A slice length that takes each range whole: one step per range.
inline constexpr uint64_t kWholeRange = std::numeric_limits<uint64_t>::max();

// Calls f(offset, length) for the consecutive slices of [begin, end), each `slice` (>= 1)
// elements long but the last.
template <class F>
void forEachSlice(uint64_t begin, uint64_t end, uint64_t slice, F&& f) {
  for (uint64_t x = begin; x < end;) {
    const uint64_t len = std::min(slice, end - x);
    f(x, len);
    x += len;
  }
}

// The usual walk of one rank: a lane per channel part, on the part's channel, that takes the
// part `slice` elements at a time; f(lane, offset, length) adds the steps of one slice.
template <class F>
void forEachPartSlice(plan::Program& p, const std::vector<ChannelPart>& parts, uint64_t slice,
                      F&& f) {
  for (const ChannelPart& part : parts) {
    const int lane = addLane(p, part.channel);
    forEachSlice(part.begin, part.end, slice, [&](uint64_t x, uint64_t len) { f(lane, x, len); });
  }
}

// Throws weft::Error(kInvalidArgument) for a spec no generator can build (bad nranks, root,
// elemSize or channel count).
void checkSpec(const plan::Spec& spec, const Options& options);

// A plan with a Program (no lanes) for every rank.
plan::Plan emptyPlan(const plan::Spec& spec, const char* algorithm);

// emptyPlan(spec, algorithm) with each rank's Program filled in by programOf(program, rank).
template <class F>
plan::Plan eachRank(const plan::Spec& spec, const char* algorithm, F&& programOf) {
  plan::Plan plan = emptyPlan(spec, algorithm);
  for (int r = 0; r < spec.nranks; ++r) programOf(plan.programs[r], r);
  return plan;
}

// nranks == 1 or count == 0: copies the rank's count elements from input to output, or nothing.
// Returns false (and leaves `plan` alone) when the spec needs a real algorithm.
bool trivialPlan(const plan::Spec& spec, const char* algorithm, plan::Plan* plan);

// A collective of an algorithm and the function that builds its plans that are not trivial.
struct CollectiveBuilder {
  plan::Collective coll;
  plan::Plan (*build)(const plan::Spec&, const Options&);
};

// What every generator does with a spec: checkSpec, then the trivialPlan where there is one,
// else the plan of the builder for spec.coll. Throws weft::Error(kInvalidArgument) when
// `builders` has none ("<algorithm> does not implement <collective>").
plan::Plan buildCollective(const char* algorithm, const plan::Spec& spec, const Options& options,
                           std::initializer_list<CollectiveBuilder> builders);

}  // namespace weft::algo
