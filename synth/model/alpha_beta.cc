#include "synth/model/alpha_beta.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "synth/model/cost_model.h"

namespace weft::synth {

using plan::Collective;

double log2Rounds(int nranks) { return std::ceil(std::log2(std::max(2.0, double(nranks)))); }

AlphaBetaView alphaBetaOf(const Fabric& fabric, AlphaBeta fallbackLocal) {
  AlphaBetaView v;
  v.nranks = fabric.nranks;
  std::map<int, int> perHost;
  for (int h : fabric.hostOf) ++perHost[h];
  v.hosts = std::max<int>(1, static_cast<int>(perHost.size()));
  for (const auto& [host, ranks] : perHost) v.maxLocal = std::max(v.maxLocal, ranks);
  if (v.hosts == 1) v.maxLocal = 1;
  bool anyLocal = false;
  for (int a = 0; a < fabric.nranks; ++a)
    for (int b = 0; b < fabric.nranks; ++b) {
      if (a == b) continue;
      AlphaBeta hop{fabric.routeLatencyUs(a, b), 1.0 / (fabric.routeBw(a, b) * kBytesPerUsPerGBs)};
      const bool sameHost = fabric.hostOf.empty() || fabric.hostOf[a] == fabric.hostOf[b];
      AlphaBeta& into = sameHost ? v.local : v.net;
      into.alphaUs = std::max(into.alphaUs, hop.alphaUs);
      into.betaUsPerByte = std::max(into.betaUsPerByte, hop.betaUsPerByte);
      anyLocal |= sameHost;
    }
  if (!anyLocal) v.local = fallbackLocal;
  return v;
}

double ClosedForm::timeUs(const AlphaBetaView& view) const {
  if (!supported) return std::numeric_limits<double>::infinity();
  return flat.timeUs(view.flat()) + (view.oneHost() ? 0.0 : local.timeUs(view.local));
}

namespace {

// The reduce-scatter + allgather shape's bandwidth share against the ring's (see the header).
double traffic(Collective coll, const AlphaBetaView& v) {
  const double n = v.nranks, L = v.maxLocal;
  if (!v.oneHost()) return L * (n - L) / (n - 1);
  return coll == Collective::kAllReduce ? (3 * n - 1) / (5 * (n - 1)) : (n + 1) / (3 * (n - 1));
}

ClosedForm flatForm(double steps, double bytes, double scale = 1) {
  ClosedForm f;
  f.supported = true;
  f.flat = {steps, bytes, scale};
  return f;
}

}  // namespace

ClosedForm closedForm(Shape shape, Collective coll, const AlphaBetaView& v, double bytes) {
  const double n = v.nranks, logn = log2Rounds(v.nranks);
  const bool pow2 = (v.nranks & (v.nranks - 1)) == 0;
  const bool rooted = coll == Collective::kBroadcast || coll == Collective::kReduce;
  const bool gatherScatter = coll == Collective::kAllGather || coll == Collective::kReduceScatter;
  switch (shape) {
    case Shape::kRing:
      // Allreduce: a reduce-scatter and an allgather round, n - 1 steps each; a chain pipelines
      // the buffer through n - 1 hops.
      if (coll == Collective::kAllReduce) return flatForm(2 * (n - 1), 2 * (n - 1) / n * bytes);
      if (rooted) return flatForm(n - 1, bytes);
      if (gatherScatter) return flatForm(n - 1, (n - 1) * bytes);
      break;
    case Shape::kTree:
      // An inner rank sends (or receives) the buffer twice.
      if (coll == Collective::kAllReduce) return flatForm(2 * logn, 2 * bytes);
      if (rooted) return flatForm(logn, 2 * bytes);
      break;
    case Shape::kHalvingDoubling:
      // Ranks beyond the largest power of 2 first fold their whole buffer in and get it back.
      if (coll == Collective::kAllReduce)
        return flatForm(2 * logn + (pow2 ? 0 : 2), (2 * (n - 1) / n + (pow2 ? 0 : 2)) * bytes);
      if (gatherScatter) return flatForm(logn, (n - 1) * bytes);
      break;
    case Shape::kDirect:
      // A message per peer; an allreduce's every rank receives and adds every input.
      if (coll == Collective::kAllReduce) return flatForm(n - 1, n * bytes);
      if (coll == Collective::kSendRecv) break;
      return flatForm(n - 1, (n - 1) * bytes);
    case Shape::kReduceScatterAllGather:
      // A step per peer and one per round.
      if (coll == Collective::kAllReduce)
        return flatForm(1 + n, 2 * (n - 1) / n * bytes, traffic(coll, v));
      if (coll == Collective::kReduceScatter) return flatForm(n, (n - 1) * bytes, traffic(coll, v));
      break;
    case Shape::kHierarchical: {
      if (v.oneHost()) break;
      // A ring among the H host leaders over the network; chains inside the hosts of L ranks.
      const double H = v.hosts, L = v.maxLocal;
      ClosedForm f;
      f.supported = true;
      if (coll == Collective::kAllReduce) {
        f.flat = {2 * (H - 1), 2 * (H - 1) / H * bytes};
        f.local = {2 * (L - 1), bytes};
        return f;
      }
      if (gatherScatter) {
        f.flat = {(H - 1) * L, (n - n / H) * bytes};
        f.local = {2 * L, n * bytes};
        return f;
      }
      break;
    }
  }
  return {};
}

}  // namespace weft::synth
