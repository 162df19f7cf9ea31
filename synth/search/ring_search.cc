#include "synth/search/ring_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
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

// NCCL's pattern: as many rings as fit at one speed, found by a depth-first search that
// continues into the next ring when one closes and backtracks across rings when a later ring
// cannot be completed.
class UniformRings {
 public:
  UniformRings(const Fabric& f, double speed, int target, int64_t budget)
      : f_(f), speed_(speed), target_(target), budget_(budget), uses_(f.links.size(), 0) {
    for (const FabricLink& l : f.links) rem_.push_back(l.bw);
  }

  std::vector<std::vector<int>> run() {
    startRing();
    return best_;
  }
  int64_t budgetLeft() const { return budget_; }

 private:
  bool fits(int a, int b) {
    bool ok = true;
    for (int l : f_.routes[a][b]) ++uses_[l];
    for (int l : f_.routes[a][b]) ok = ok && rem_[l] >= speed_ * uses_[l] * (1 - 1e-12);
    for (int l : f_.routes[a][b]) --uses_[l];
    return ok;
  }

  void startRing() {
    if (static_cast<int>(done_.size()) > static_cast<int>(best_.size())) best_ = done_;
    if (static_cast<int>(best_.size()) >= target_ || budget_ < 0) return;
    path_ = {0};
    visited_.assign(f_.nranks, 0);
    visited_[0] = 1;
    extend();
  }

  void extend() {
    if (static_cast<int>(best_.size()) >= target_ || --budget_ < 0) return;
    const int n = f_.nranks, last = path_.back();
    if (static_cast<int>(path_.size()) == n) {
      if (!fits(last, 0)) return;
      for (int l : f_.routes[last][0]) ++uses_[l];
      // The ring closes: take its capacity and look for the next one.
      for (size_t l = 0; l < uses_.size(); ++l) rem_[l] -= speed_ * uses_[l];
      const std::vector<int> ring = path_;
      const std::vector<int> uses = uses_;
      const std::vector<char> visited = visited_;
      std::fill(uses_.begin(), uses_.end(), 0);
      done_.push_back(ring);
      startRing();
      done_.pop_back();
      path_ = ring;
      uses_ = uses;
      visited_ = visited;
      for (size_t l = 0; l < uses_.size(); ++l) rem_[l] += speed_ * uses_[l];
      for (int l : f_.routes[last][0]) --uses_[l];
      return;
    }
    for (int v = 0; v < n; ++v) {
      if (visited_[v] || !fits(last, v)) continue;
      for (int l : f_.routes[last][v]) ++uses_[l];
      visited_[v] = 1;
      path_.push_back(v);
      extend();
      path_.pop_back();
      visited_[v] = 0;
      for (int l : f_.routes[last][v]) --uses_[l];
      if (static_cast<int>(best_.size()) >= target_ || budget_ < 0) return;
    }
  }

  const Fabric& f_;
  const double speed_;
  const int target_;
  int64_t budget_;
  std::vector<int> uses_;
  std::vector<double> rem_;
  std::vector<int> path_;
  std::vector<char> visited_;
  std::vector<std::vector<int>> done_, best_;
};

// Rings at one common speed with the largest total, trying speeds that divide a link's
// bandwidth among up to maxRings rings, fastest first; empty when none beats `beat` GB/s.
std::vector<Ring> uniformRings(const Fabric& f, const RingSearchOptions& o, double maxSpeed,
                               double beat) {
  std::vector<double> speeds;
  for (const FabricLink& l : f.links)
    for (int k = 1; k <= o.maxRings; ++k)
      if (l.bw / k <= maxSpeed * (1 + 1e-12)) speeds.push_back(l.bw / k);
  std::sort(speeds.rbegin(), speeds.rend());
  speeds.erase(std::unique(speeds.begin(), speeds.end(),
                           [](double a, double b) { return std::abs(a - b) <= 1e-9 * a; }),
               speeds.end());
  // Every ring enters and leaves every rank and every host: the bandwidth of those cuts caps
  // the total of all rings.
  double cap = kInf;
  auto cutCap = [&](auto inside) {
    double out = 0, in = 0;
    for (const FabricLink& l : f.links) {
      if (inside(l.from) && !inside(l.to)) out += l.bw;
      if (!inside(l.from) && inside(l.to)) in += l.bw;
    }
    cap = std::min({cap, out, in});
  };
  for (int r = 0; r < f.nranks; ++r) cutCap([&](int v) { return v == r; });
  for (int r = 0; r < f.nranks; ++r)
    if (f.hostOf[r] != f.hostOf[0]) {
      for (int h : {f.hostOf[0], f.hostOf[r]}) cutCap([&](int v) { return f.nodes[v].host == h; });
      break;
    }
  std::vector<Ring> best;
  int64_t budget = o.maxIterations;  // shared by all speeds
  for (double s : speeds) {
    const int target =
        static_cast<int>(std::min<double>(o.maxRings, std::floor(cap / s * (1 + 1e-9))));
    if (s * target <= beat * (1 + 1e-9)) continue;  // cannot beat what we have
    if (budget <= 0) break;
    UniformRings search(f, s, target, budget);
    const auto found = search.run();
    budget = search.budgetLeft();
    if (found.size() * s > beat * (1 + 1e-9)) {
      beat = found.size() * s;
      best.clear();
      for (const auto& order : found) best.push_back({order, s});
    }
  }
  return best;
}

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
    for (int l : f.routes.at(order[i]).at(order[(i + 1) % n])) crosses |= f.links[l].kind == kind;
    crossings += crosses;
  }
  return crossings;
}

double totalRingBw(const std::vector<Ring>& rings) {
  double sum = 0;
  for (const Ring& r : rings) sum += r.bw;
  return sum;
}

std::string describeRings(const Fabric& f, const std::vector<Ring>& rings) {
  std::ostringstream out;
  for (size_t i = 0; i < rings.size(); ++i) {
    out << "ring " << i << ": " << rings[i].bw << " GB/s";
    for (int r : rings[i].order) out << " " << f.nodes.at(r).name;
    out << "\n";
  }
  return out.str();
}

std::vector<Ring> searchRings(const Fabric& f, const RingSearchOptions& o) {
  checkFabric(f);
  if (o.maxRings < 1 || o.maxIterations < 1 || o.minRings < 1 || o.minFraction < 0)
    throw Error(Status::kInvalidArgument,
                "ring search: maxRings, minRings and maxIterations "
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
    // NCCL's way (one speed for all rings) finds more where greedy rings block each other.
    if (!rings.empty()) {
      std::vector<Ring> uniform = uniformRings(f, o, rings.front().bw, totalRingBw(rings));
      if (!uniform.empty()) rings = std::move(uniform);
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
