#include "synth/model/max_flow.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <string>

#include "src/common/error.h"

namespace weft::synth {

MaxFlow::MaxFlow(int nodes) : head_(std::max(0, nodes)) {}

int MaxFlow::addArc(int u, int v, double capacity) {
  if (u < 0 || v < 0 || u >= nodes() || v >= nodes())
    throw Error(Status::kInvalidArgument, "max-flow: arc " + std::to_string(u) + " -> " +
                                              std::to_string(v) + " outside the graph");
  if (!(capacity >= 0))
    throw Error(Status::kInvalidArgument, "max-flow: arc " + std::to_string(u) + " -> " +
                                              std::to_string(v) + " has capacity " +
                                              std::to_string(capacity));
  const int id = static_cast<int>(arcs_.size());
  arcs_.push_back({v, capacity, 0});
  arcs_.push_back({u, 0, 0});
  head_[u].push_back(id);
  head_[v].push_back(id + 1);
  // Tolerance relative to the largest capacity, so rates in GB/s and in bytes both work.
  if (std::isfinite(capacity)) eps_ = std::max(eps_, capacity * 1e-12);
  return id / 2;
}

bool MaxFlow::levels(int s, int t) {
  level_.assign(nodes(), -1);
  std::queue<int> q;
  level_[s] = 0;
  q.push(s);
  while (!q.empty()) {
    const int u = q.front();
    q.pop();
    for (int a : head_[u]) {
      const Arc& arc = arcs_[a];
      if (level_[arc.to] < 0 && arc.cap - arc.flow > eps_) {
        level_[arc.to] = level_[u] + 1;
        q.push(arc.to);
      }
    }
  }
  return level_[t] >= 0;
}

double MaxFlow::push(int u, int t, double limit) {
  if (u == t) return limit;
  for (int& i = next_[u]; i < static_cast<int>(head_[u].size()); ++i) {
    const int a = head_[u][i];
    Arc& arc = arcs_[a];
    if (level_[arc.to] != level_[u] + 1 || arc.cap - arc.flow <= eps_) continue;
    const double got = push(arc.to, t, std::min(limit, arc.cap - arc.flow));
    if (got > 0) {
      arc.flow += got;
      arcs_[a ^ 1].flow -= got;
      return got;
    }
  }
  return 0;
}

double MaxFlow::solve(int s, int t) {
  if (s < 0 || t < 0 || s >= nodes() || t >= nodes() || s == t)
    throw Error(Status::kInvalidArgument,
                "max-flow: bad source " + std::to_string(s) + " or sink " + std::to_string(t));
  for (Arc& a : arcs_) a.flow = 0;
  source_ = s;
  double total = 0;
  while (levels(s, t)) {
    next_.assign(nodes(), 0);
    while (double f = push(s, t, std::numeric_limits<double>::infinity())) total += f;
  }
  return total;
}

std::vector<bool> MaxFlow::sourceSide() const {
  std::vector<bool> seen(nodes(), false);
  if (source_ < 0) return seen;
  std::vector<int> stack = {source_};
  seen[source_] = true;
  while (!stack.empty()) {
    const int u = stack.back();
    stack.pop_back();
    for (int a : head_[u]) {
      const Arc& arc = arcs_[a];
      if (!seen[arc.to] && arc.cap - arc.flow > eps_) {
        seen[arc.to] = true;
        stack.push_back(arc.to);
      }
    }
  }
  return seen;
}

double MaxFlow::flowOn(int arc) const { return arcs_.at(2 * arc).flow; }

}  // namespace weft::synth
