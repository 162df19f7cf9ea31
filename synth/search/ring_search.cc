#include "synth/search/ring_search.h"

#include <algorithm>
#include <limits>
#include <string>

#include "src/common/error.h"

namespace weft::synth {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void checkFabric(const Fabric& f) {
  if (f.nranks < 1) throw Error(Status::kInvalidArgument, "ring search: fabric has no ranks");
  if (static_cast<int>(f.routes.size()) != f.nranks)
    throw Error(Status::kInvalidArgument, "ring search: fabric has no routes between its ranks");
  for (int a = 0; a < f.nranks; ++a)
    for (int b = 0; b < f.nranks; ++b)
      if (a != b && f.routes[a].at(b).empty())
        throw Error(Status::kInvalidArgument, "ring search: no route from rank " +
                                                  std::to_string(a) + " to rank " +
                                                  std::to_string(b));
}

// Depth-first search for the ring with the widest bottleneck on `remaining` capacities; ties go
// to the ring with fewer link crossings in total (shorter routes).
class RingDfs {
 public:
  RingDfs(const Fabric& f, const std::vector<double>& remaining, int64_t budget)
      : f_(f), rem_(remaining), uses_(f.links.size(), 0), budget_(budget) {
    const int n = f.nranks;
    // Upper bound: every rank needs one hop in and one hop out.
    bound_ = kInf;
    for (int v = 0; v < n; ++v) {
      double in = 0, out = 0;
      for (int u = 0; u < n; ++u)
        if (u != v) {
          in = std::max(in, hopBw(u, v));
          out = std::max(out, hopBw(v, u));
        }
      bound_ = std::min({bound_, in, out});
    }
  }

  // Best ring found (empty when none has positive bandwidth).
  std::vector<int> run(double* bw) {
    const int n = f_.nranks;
    visited_.assign(n, 0);
    path_ = {0};
    visited_[0] = 1;
    extend(kInf, 0);
    *bw = bestBw_;
    return best_;
  }

 private:
  double hopBw(int a, int b) const {
    double bw = kInf;
    for (int l : f_.routes[a][b]) bw = std::min(bw, rem_[l]);
    return bw;
  }

  // Bottleneck after adding hop a -> b to a path whose bottleneck is `bw` (uses_ not yet updated).
  double withHop(int a, int b, double bw) {
    for (int l : f_.routes[a][b]) ++uses_[l];
    for (int l : f_.routes[a][b]) bw = std::min(bw, rem_[l] / uses_[l]);
    for (int l : f_.routes[a][b]) --uses_[l];
    return bw;
  }

  bool worse(double bw, int hops) const {
    return bw < bestBw_ || (bw == bestBw_ && hops >= bestHops_);
  }

  void extend(double bw, int hops) {
    if (done_) return;
    if (--budget_ < 0) {
      done_ = true;
      return;
    }
    const int n = f_.nranks;
    const int last = path_.back();
    if (static_cast<int>(path_.size()) == n) {
      if (n == 1) {
        best_ = path_;
        bestBw_ = kInf;
        done_ = true;
        return;
      }
      const double closed = withHop(last, path_[0], bw);
      const int h = hops + static_cast<int>(f_.routes[last][path_[0]].size());
      if (closed > 0 && !worse(closed, h)) {
        best_ = path_;
        bestBw_ = closed;
        bestHops_ = h;
        // Nothing can beat the bound; equal bandwidth with fewer hops is still worth a look
        // only while the budget lasts, so stop at the bound.
        if (closed >= bound_) done_ = true;
      }
      return;
    }
    struct Cand {
      int next;
      double bw;
      int hops;
    };
    std::vector<Cand> cands;
    for (int v = 0; v < n; ++v) {
      if (visited_[v]) continue;
      const double nb = withHop(last, v, bw);
      const int h = hops + static_cast<int>(f_.routes[last][v].size());
      if (nb <= 0 || worse(nb, h)) continue;
      cands.push_back({v, nb, h});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
      if (a.bw != b.bw) return a.bw > b.bw;
      return a.hops < b.hops;
    });
    for (const Cand& c : cands) {
      if (done_) return;
      if (worse(c.bw, c.hops)) continue;  // the best may have improved meanwhile
      for (int l : f_.routes[last][c.next]) ++uses_[l];
      visited_[c.next] = 1;
      path_.push_back(c.next);
      extend(c.bw, c.hops);
      path_.pop_back();
      visited_[c.next] = 0;
      for (int l : f_.routes[last][c.next]) --uses_[l];
    }
  }

  const Fabric& f_;
  const std::vector<double>& rem_;
  std::vector<int> uses_;
  std::vector<char> visited_;
  std::vector<int> path_;
  std::vector<int> best_;
  double bestBw_ = 0;
  int bestHops_ = std::numeric_limits<int>::max();
  double bound_ = kInf;
  int64_t budget_;
  bool done_ = false;
};

}  // namespace

std::vector<int> ringLinkUses(const Fabric& f, const std::vector<int>& order) {
  std::vector<int> uses(f.links.size(), 0);
  const int n = static_cast<int>(order.size());
  if (n < 2) return uses;
  for (int i = 0; i < n; ++i)
    for (int l : f.routes.at(order[i]).at(order[(i + 1) % n])) ++uses[l];
  return uses;
}

double ringBottleneck(const Fabric& f, const std::vector<int>& order) {
  const std::vector<int> uses = ringLinkUses(f, order);
  double bw = kInf;
  for (size_t l = 0; l < uses.size(); ++l)
    if (uses[l] > 0) bw = std::min(bw, f.links[l].bw / uses[l]);
  return bw;
}

int ringCrossings(const Fabric& f, const std::vector<int>& order, topo::LinkKind kind) {
  const int n = static_cast<int>(order.size());
  int crossings = 0;
  for (int i = 0; i < n && n > 1; ++i) {
    bool crosses = false;
    for (int l : f.routes.at(order[i]).at(order[(i + 1) % n]))
      crosses |= f.links[l].kind == kind;
    crossings += crosses;
  }
  return crossings;
}

double totalRingBw(const std::vector<Ring>& rings) {
  double sum = 0;
  for (const Ring& r : rings) sum += r.bw;
  return sum;
}

std::vector<Ring> searchRings(const Fabric& f, const RingSearchOptions& o) {
  checkFabric(f);
  if (o.maxRings < 1 || o.maxIterations < 1 || o.minRings < 1 || o.minFraction < 0)
    throw Error(Status::kInvalidArgument, "ring search: maxRings, minRings and maxIterations "
                                          "must be positive and minFraction non-negative");
  std::vector<Ring> rings;
  if (f.nranks == 1) {
    rings.push_back({{0}, kInf});
  } else {
    std::vector<double> remaining;
    for (const FabricLink& l : f.links) remaining.push_back(l.bw);
    while (static_cast<int>(rings.size()) < o.maxRings) {
      double bw = 0;
      RingDfs dfs(f, remaining, o.maxIterations);
      std::vector<int> order = dfs.run(&bw);
      if (order.empty() || bw <= 0) break;
      if (!rings.empty() && bw < o.minFraction * rings.front().bw) break;
      const std::vector<int> uses = ringLinkUses(f, order);
      for (size_t l = 0; l < uses.size(); ++l)
        remaining[l] = std::max(0.0, remaining[l] - bw * uses[l]);
      rings.push_back({std::move(order), bw});
    }
  }
  // Duplicate rings (halving their bandwidth), widest first, up to minRings channels.
  const int want = std::min(o.minRings, o.maxRings);
  while (!rings.empty() && static_cast<int>(rings.size()) < want) {
    auto widest = std::max_element(rings.begin(), rings.end(),
                                   [](const Ring& a, const Ring& b) { return a.bw < b.bw; });
    widest->bw /= 2;
    Ring copy = *widest;
    rings.insert(widest + 1, copy);
  }
  return rings;
}

}  // namespace weft::synth
