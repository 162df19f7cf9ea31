// Maximum flow (Dinic's algorithm) on a small directed graph with real capacities, and the
// minimum cut it proves. Used by the lower bounds; also handy for packing-style synthesis.
#pragma once
#include <vector>

namespace weft::synth {

class MaxFlow {
 public:
  explicit MaxFlow(int nodes);
  int nodes() const { return static_cast<int>(head_.size()); }
  // Adds an arc u -> v; returns its id (for flowOn). Capacities below zero are errors.
  int addArc(int u, int v, double capacity);
  // Maximum flow from s to t (recomputed from zero flow on every call).
  double solve(int s, int t);
  // After solve(): nodes reachable from s in the residual graph: the source side of a minimum cut
  // (the smallest one).
  std::vector<bool> sourceSide() const;
  double flowOn(int arc) const;

 private:
  struct Arc {
    int to;
    double cap, flow;
  };
  bool levels(int s, int t);
  double push(int u, int t, double limit);

  std::vector<Arc> arcs_;  // arc 2i is forward, 2i+1 its reverse
  std::vector<std::vector<int>> head_;
  std::vector<int> level_, next_;
  int source_ = -1;
  double eps_ = 1e-9;
};

}  // namespace weft::synth
