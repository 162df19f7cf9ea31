// Closed-form alpha-beta costs of the textbook collective algorithms (ring, tree, recursive
// halving-doubling, direct, reduce-scatter + allgather, hierarchical), on the alpha-beta view of a
// Fabric: a latency and a cost per byte for the hop between two ranks of one host and for the hop
// between hosts. A cost is a linear form per level, time = steps * alpha + bytes * beta * scale,
// so that a caller can correct one term (the algorithm selector's measured corrections) and still
// read what the model said.
//
// On one host ranks read each other's memory, and the cost of a byte is the memory traffic it
// causes: the reduce-scatter + allgather shape's bandwidth term is scaled by its traffic against
// the ring's (allreduce 3n-1 bytes per byte over all ranks against about 5(n-1); reduce-scatter
// n+1 against 3(n-1)). Across hosts the bytes sent decide: as many per rank as the ring's, but a
// host's L ranks share its network link for the share (n-L)/(n-1) that leaves the host.
#pragma once
#include <cstdint>

#include "src/plan/plan.h"
#include "synth/model/fabric.h"

namespace weft::synth {

// The algorithm shapes the closed forms know.
enum class Shape : uint8_t {
  kRing,             // ring (allreduce, allgather, reduce-scatter), chain (broadcast, reduce)
  kTree,             // binary tree
  kHalvingDoubling,  // recursive halving-doubling
  kDirect,           // every rank exchanges with every peer at once
  kReduceScatterAllGather,  // a direct reduce-scatter, then (allreduce) a direct allgather
  kHierarchical,            // a ring among host leaders, chains inside hosts
};

struct AlphaBeta {
  double alphaUs = 0;        // per message step
  double betaUsPerByte = 0;  // per byte through the hop
};

// What the closed forms see of a fabric.
struct AlphaBetaView {
  int nranks = 1;
  int hosts = 1;
  int maxLocal = 1;  // the most ranks on one host (1 on one host: the view is flat)
  AlphaBeta local;   // between two ranks of one host
  AlphaBeta net;     // between ranks of different hosts (unused on one host)
  bool oneHost() const { return hosts <= 1; }
  // The hop a flat algorithm's slowest messages take: the network's across hosts.
  const AlphaBeta& flat() const { return oneHost() ? local : net; }
};

// The view of `fabric`: local = the slowest route between two ranks of one host, net = the slowest
// between hosts (alpha: the route's latency; beta: 1 / its bottleneck bandwidth). Where no host
// holds two ranks, `local` is `fallbackLocal`.
AlphaBetaView alphaBetaOf(const Fabric& fabric, AlphaBeta fallbackLocal = {});

// One level's cost: time = steps * alpha + bytes * beta * scale.
struct LevelCost {
  double steps = 0;
  double bytes = 0;
  double scale = 1;  // the model's own share (memory traffic, a shared network link), else 1
  double timeUs(const AlphaBeta& link) const {
    return steps * link.alphaUs + bytes * link.betaUsPerByte * scale;
  }
};

struct ClosedForm {
  bool supported = false;
  LevelCost flat;   // over view.flat()
  LevelCost local;  // hierarchical only: the hops inside hosts, over view.local
  double timeUs(const AlphaBetaView& view) const;  // infinity when not supported
};

// The closed form of `shape` for `coll` over `bytes` (count x element size of the call, as the
// selector sees it). Unsupported: the shape has no form for the collective, or a hierarchical
// shape on one host.
ClosedForm closedForm(Shape shape, plan::Collective coll, const AlphaBetaView& view, double bytes);

// ceil(log2(max(2, n))): the rounds of a tree or of halving-doubling.
double log2Rounds(int nranks);

}  // namespace weft::synth
