// ChunkPlans over weighted spanning trees: the emitter shared by the double binary tree plans and
// the packed (Blink / ForestColl) plans. Each job is one tree that moves a contiguous range of
// loop chunks, cut into pieces that travel the tree one after another (pipelined chunk by
// chunk). Out-trees broadcast from their root (broadcast, allgather), in-trees reduce towards it
// (reduce, reduce-scatter), allreduce reduces up each tree and broadcasts back down.
//
// Every job gets its own lanes; jobs whose trees share a directed rank pair get different
// channels (greedy colouring), so sends of different trees to the same peer never share a FIFO
// and cannot block each other.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/plan/chunk_plan.h"

namespace weft::synth {

struct TreeJob {
  std::vector<int> parent;  // per rank; -1 at the tree's root (exactly one)
  uint64_t first = 0;       // loop chunks [first, first + count) this tree carries
  uint64_t count = 0;
  uint64_t pieces = 0;  // steps the range is cut into; 0 = one per chunk
  // Explicit piece sizes in chunks (summing to count), overriding `pieces`: small pieces at the
  // ends shorten the pipeline fill and drain, large ones in the middle keep steps few.
  std::vector<uint64_t> pieceSizes;
  // Explicit pieces (first chunk, chunks), overriding all of the above where not empty: the job
  // carries exactly these chunks, in this order, which need not be contiguous (`count` must be
  // their sum; `first` is ignored). Lets jobs of different trees advance through a root's data
  // in step (see packPlan's allreduce).
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
};

// Piece sizes for `count` chunks: doubling from 1 up to about count / steady, `steady` pieces of
// that size, then halving back to 1 (store-and-forward hops wait for one small piece only).
// `roundUp`: the large size rounded up, so there are at most about `steady` pieces even where
// they are a chunk or two (rounded down, a job of fewer than 2 x steady chunks gets a piece per
// chunk, and pieces that small pay a network hop's latency every few FIFO slots; see
// perf/README.md, "Simulated plan layouts").
std::vector<uint64_t> rampedPieces(uint64_t count, uint64_t steady, bool roundUp = false);

// The root of a parent array, or -1 when it is not a spanning tree (one root, no cycles).
int treeRoot(const std::vector<int>& parent);

// Builds the plan. Loop chunks are MSCCL's: allgather jobs rooted at r cover chunks of rank r's
// output block [r * C / n, (r + 1) * C / n), reduce-scatter jobs the same blocks of the input,
// broadcast / reduce jobs are rooted at `root`; the ranges of all jobs partition [0, C) with
// C = chunksPerLoop. Throws weft::Error(kInvalidArgument) naming the job that breaks a rule.
// `laneJobs`, when given, receives per rank and lane the index of the job the lane serves.
plan::ChunkPlan forestPlan(plan::Collective coll, int nranks, int root, uint64_t chunksPerLoop,
                           const std::vector<TreeJob>& jobs, const std::string& name,
                           std::vector<std::vector<int>>* laneJobs = nullptr);

// Allreduce as a reduce-scatter followed by an allgather over different trees: `upJobs` reduce
// each chunk to their root (partial sums in the output buffer), `downJobs` broadcast it from
// there; both partition [0, C) and agree on every chunk's root. A root's first send of a chunk
// waits for its full sum, a rank's receive of a chunk for its own reduce steps on it, so the
// broadcast of one chunk overlaps the reduction of others. Lanes serving downJobs[k] count as
// job upJobs.size() + k in `laneJobs`.
plan::ChunkPlan forestPlanAllReduce(int nranks, uint64_t chunksPerLoop,
                                    const std::vector<TreeJob>& upJobs,
                                    const std::vector<TreeJob>& downJobs, const std::string& name,
                                    std::vector<std::vector<int>>* laneJobs = nullptr);

// Channels forestPlan() gives the jobs (for tests and tools).
std::vector<int> forestChannels(plan::Collective coll, const std::vector<TreeJob>& jobs);

}  // namespace weft::synth
