// Event simulator: predicts how long a Plan takes on a Fabric under the cost model
// (synth/model/cost_model.h), following the executor's semantics:
//  - each rank's lanes run their steps in order; a step starts when its lane's previous step and
//    its deps are done (plus SimOptions::stepOverheadUs);
//  - messages travel over FIFOs per (sender, receiver, channel): the k-th message sent into a
//    FIFO is the k-th received from it, as in the executor;
//  - a step moves its data in slices (sliceBytes, like the executor's FIFO slots); a slice being
//    sent takes one of the FIFO's fifoSlots slots until the receiving step has consumed it, so a
//    forwarding step (recvCopySend, recvReduceSend, ...) forwards slice i while slice i+1 arrives;
//  - a slice's transfer shares link bandwidth max-min fairly with all concurrent transfers,
//    weighted by its lane's plan::Lane::share, and arrives the route's latency after its last
//    byte was sent.
// Local steps (copy, reduce) cost bytes / localBw, or nothing when localBw is 0.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/plan/chunk_plan.h"
#include "src/plan/plan.h"
#include "synth/model/fabric.h"
#include "synth/model/sim_options.h"

namespace weft::synth {

struct StepId {
  int rank = -1, lane = -1, step = -1;
};

// One step on the critical path (the chain of waits that ends at the last step to finish).
struct CriticalStep {
  StepId id;
  double startUs = 0, endUs = 0;
  std::string waitedFor;  // "lane", "dependency", "data", "slot", or "" for the first
};

struct LinkUsage {
  double bytes = 0;                // bytes that crossed the link
  double busyUs = 0;               // time with at least one transfer on it
  double firstUs = 0, lastUs = 0;  // when it was first and last busy (idle at the ends)
};

struct SimResult {
  double timeUs = 0;                              // when the last step finished
  std::vector<double> rankFinishUs;               // per rank
  std::vector<std::vector<double>> laneFinishUs;  // per rank and lane: when its last step ended
  std::vector<LinkUsage> links;                   // per fabric link
  StepId lastStep;                                // the step that finished last
  std::vector<CriticalStep> criticalPath;
  uint64_t events = 0;  // slice transfers and step completions simulated
  // Multi-line report: time, busiest links, the critical path's tail.
  std::string summary(const Fabric& fabric) const;
};

// Simulates `plan` on `fabric` (plan.spec.nranks must equal fabric.nranks). Throws
// weft::Error(kInvalidArgument) naming the step for a receive without a matching send (or the
// reverse), mismatched message sizes, bad peers, deps or channels, and for a deadlock (listing
// what each stuck lane waits for).
SimResult simulate(const plan::Plan& plan, const Fabric& fabric, const SimOptions& options = {});

// The API count whose message size is `bytes` in nccl-tests' terms: allgather = total output
// bytes, reducescatter = total input bytes, alltoall = bytes sent per rank, others = buffer bytes.
uint64_t countForBytes(plan::Collective coll, int nranks, uint64_t bytes, uint32_t elemSize);

// Instantiates `chunkPlan` for `bytes` (countForBytes, rounded up so the chunks are whole) with
// elements of `elemSize` bytes and simulates it.
SimResult simulate(const plan::ChunkPlan& chunkPlan, uint64_t bytes, const Fabric& fabric,
                   const SimOptions& options = {}, uint32_t elemSize = 4);

}  // namespace weft::synth
