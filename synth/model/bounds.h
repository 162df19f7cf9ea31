// Lower bounds on the time of a collective over a Fabric, for M bytes in nccl-tests' terms
// (allgather: total output bytes; reducescatter: total input bytes; alltoall: bytes sent per
// rank; gather / scatter: the root's whole buffer; allreduce, broadcast, reduce: buffer bytes).
// Every fabric node (ranks and switches, CPUs, NICs) may relay data; links carry their bandwidth
// in each direction. A fabric built with FabricOptions::allLinks gives the machine's bound; one
// of routes only, the bound for plans that follow those routes.
//
// Bandwidth bounds:
//  - allgather (ForestColl cut bound): T >= (M/N) * max over node sets S that miss a rank of
//    |S ∩ ranks| / B+(S), B+(S) = bandwidth leaving S. Found exactly with max-flow (Dinkelbach
//    iterations over a super source joined to every rank).
//  - reducescatter: the same on the reversed fabric.
//  - allreduce (no in-network reduction): reducescatter bound + allgather bound.
//  - broadcast / reduce from root r: M / min over ranks v of maxflow(r -> v) (reversed for reduce).
//  - alltoall: max over rank partitions (A, B) of (|A| |B| M/N bytes that must cross) / min cut
//    from A to B: every partition up to 10 ranks; beyond, each rank alone, all but one rank, each
//    host and each prefix of the rank order.
//  - gather / scatter: (N-1)/N M through the min cut between the root and the others, and M/N
//    through the min cut between the root and each rank.
// Latency bound: the lowest-latency path over fabric links that the collective's data must take
// end to end: the latency diameter between ranks (the root's eccentricity for broadcast / reduce).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/plan/plan.h"
#include "synth/model/fabric.h"

namespace weft::synth {

struct Cut {
  std::vector<int> source;  // fabric nodes on the sending side
  double bw = 0;            // GB/s of the links leaving `source` (the cut's capacity)
  std::string text;         // "gpu0 ingress", "host 0 egress", "{gpu0,gpu1} -> rest" ...
};

struct Bound {
  plan::Collective coll = plan::Collective::kAllGather;
  uint64_t bytes = 0;
  double bandwidthUs = 0;        // bandwidth term
  double latencyUs = 0;          // latency term
  double timeUs = 0;             // max(bandwidthUs, latencyUs): both are lower bounds
  double algBw = 0;              // GB/s: bytes / bandwidthUs (infinite when bandwidthUs is 0)
  double busBw = 0;              // algBw times nccl-tests' bus factor for the collective
  Cut cut;                       // the binding cut of the bandwidth term
  std::string describe() const;  // "allgather 1073741824 B: >= 6263.4 us (algbw 171.4 GB/s ...)"
};

// Lower bound for `coll` on `fabric` at `bytes`; `root` for broadcast / reduce. Throws
// weft::Error(kInvalidArgument) for a collective it has no bound for (sendrecv), a bad root, or
// a fabric where some rank cannot be reached.
Bound lowerBound(plan::Collective coll, const Fabric& fabric, uint64_t bytes, int root = 0);

// The ForestColl rate x* (GB/s): allgather takes at least (M/N) / x*. `reversed` for
// reduce-scatter. Sets *cut to the binding cut when given.
double allGatherCutRate(const Fabric& fabric, bool reversed = false, Cut* cut = nullptr);

// Maximum flow (GB/s) from `from` to `to` (fabric nodes), and optionally its minimum cut.
double maxFlowRate(const Fabric& fabric, int from, int to, Cut* cut = nullptr);

// nccl-tests' busbw factor: allreduce 2(N-1)/N; allgather, reducescatter, alltoall (N-1)/N;
// broadcast, reduce 1.
double busBwFactor(plan::Collective coll, int nranks);

}  // namespace weft::synth
