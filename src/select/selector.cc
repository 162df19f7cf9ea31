#include "src/select/selector.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::select {

using plan::Collective;

std::string canonicalAlgorithm(const std::string& raw) {
  std::string n;
  for (char c : raw)
    if (c != ' ') n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "halvingdoubling" || n == "hd" || n == "recursivehalvingdoubling") return "rhd";
  if (n == "pairwise" || n == "p2p") return "direct";
  if (n == "hierarchical" || n == "hierarchy") return "hier";
  return n;
}

static bool parseCollective(const std::string& s, Collective* c) {
  static const Collective kAll[] = {Collective::kAllReduce,     Collective::kBroadcast,
                                    Collective::kReduce,        Collective::kAllGather,
                                    Collective::kReduceScatter, Collective::kAlltoAll,
                                    Collective::kGather,        Collective::kScatter};
  std::string n = canonicalAlgorithm(s);
  for (Collective k : kAll)
    if (n == plan::collectiveName(k)) {
      *c = k;
      return true;
    }
  return false;
}

AlgoFilter::AlgoFilter(const std::string& text) {
  std::stringstream all(text);
  std::string part;
  while (std::getline(all, part, ';')) {
    if (part.empty()) continue;
    Rule rule;
    size_t colon = part.find(':');
    if (colon != std::string::npos) {
      if (!parseCollective(part.substr(0, colon), &rule.coll)) {
        WEFT_WARN(TUNING, "NCCL_ALGO: unknown collective '%s' ignored", part.substr(0, colon).c_str());
        continue;
      }
      rule.allCollectives = false;
      part = part.substr(colon + 1);
    }
    if (!part.empty() && part[0] == '^') {
      rule.exclude = true;
      part = part.substr(1);
    }
    std::stringstream names(part);
    std::string name;
    while (std::getline(names, name, ',')) {
      name = canonicalAlgorithm(name);
      if (!name.empty()) {
        if (!algo::find(name) && name != kLibraryAlgorithm && name != kSynthAlgorithm)
          WEFT_WARN(TUNING, "NCCL_ALGO: unknown algorithm '%s' ignored", name.c_str());
        else
          rule.names.push_back(name);
      }
    }
    rules_.push_back(rule);
  }
}

bool AlgoFilter::restricts(Collective c) const {
  for (const Rule& r : rules_)
    if (r.allCollectives || r.coll == c) return true;
  return false;
}

bool AlgoFilter::allows(Collective c, const std::string& algorithm) const {
  // The most specific matching rule decides: a per-collective rule beats a global one.
  const Rule* chosen = nullptr;
  for (const Rule& r : rules_) {
    if (!r.allCollectives && r.coll == c) chosen = &r;
    else if (r.allCollectives && (!chosen || chosen->allCollectives)) chosen = &r;
  }
  if (!chosen) return true;
  bool listed = false;
  for (const auto& n : chosen->names) listed |= n == algorithm;
  return chosen->exclude ? !listed : listed;
}

Selector::Selector(int nranks, LinkModel model, AlgoFilter filter)
    : nranks_(nranks), model_(model), filter_(std::move(filter)) {}

void Selector::setHosts(const std::vector<int>& hostOf, LinkModel net) {
  std::map<int, int> perHost;
  for (int h : hostOf) ++perHost[h];
  hosts_ = static_cast<int>(perHost.size());
  maxLocal_ = 1;
  for (auto& [h, count] : perHost) maxLocal_ = std::max(maxLocal_, count);
  hostOf_ = static_cast<int>(hostOf.size()) == nranks_ && hosts_ > 1 ? hostOf : std::vector<int>{};
  if (hostOf_.empty()) hosts_ = maxLocal_ = 1;
  net_ = net;
}

// Hierarchical plans: a ring among H host leaders over the network, chains inside hosts
// (pipelined with the ring, so the local bandwidth term counts only in part).
static double predictHierarchical(Collective c, double n, double hosts, double local,
                                  double bytes, const LinkModel& loc, const LinkModel& net) {
  const double H = hosts, L = local;
  switch (c) {
    case Collective::kAllReduce:
      return 2 * (H - 1) * net.alphaUs + 2 * (L - 1) * loc.alphaUs +
             2 * (H - 1) / H * bytes * net.betaUsPerByte + 0.6 * bytes * loc.betaUsPerByte;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      return (H - 1) * L * net.alphaUs + 2 * L * loc.alphaUs +
             (n - n / H) * bytes * net.betaUsPerByte + 0.3 * n * bytes * loc.betaUsPerByte;
    default:
      return std::numeric_limits<double>::infinity();
  }
}

double Selector::fanShare(int root) const {
  if (!sharedCores_ || hosts_ > 1 || nranks_ < 3 || coreOf_.size() != static_cast<size_t>(nranks_) ||
      root < 0 || root >= nranks_ || coreOf_[root] < 0)
    return 0;
  std::map<int, int> ranksOn;
  for (int c : coreOf_) ++ranksOn[c];
  const int own = ranksOn[coreOf_[root]] - 1;  // receivers beside the root
  int most = 0;
  for (const auto& [core, ranks] : ranksOn)
    if (core != coreOf_[root]) most = std::max(most, ranks);
  if (2 * own > most) return 0;
  // Cores even: pushing a byte to n - 1 receivers costs the root about n / 2 copies (one read,
  // n - 1 writes), and each byte it pushes spares every receiver a copy.
  return (most - own) / (nranks_ / 2.0 + most - own);
}

double Selector::predictUs(const std::string& algorithm, const plan::Spec& spec,
                           const CallTraits& call) const {
  if (!algo::supports(algorithm, spec.coll)) return std::numeric_limits<double>::infinity();
  if (algorithm == "fan") {
    // Pays once the buffers outgrow what the caches keep (as WEFT_STREAM_BYTES counts them:
    // each rank's bytes n / 2 times, from 20 MiB), in place (out of place the root's own copy
    // adds to its share). 4 ranks on 2 cores, root's core one receiver and the other two, GB/s
    // in place: 8 MiB direct 17.5-18.9, fan 16.6-17.5; 16 MiB 5.0-11.6 against 12.4-16.2;
    // 32 MiB 6.0-6.5 against 10.2-13.3; 64 MiB 4.8-5.1 against 7.7-10.2. Out of place it does
    // not pay: 32 MiB direct 5.4-7.5, fan 6.5-7.8, but 4 MiB 16.6-17.6 against 12.5-12.9 and
    // 128 MiB 7.3-7.9 against 5.7-6.0. 3 and 8 ranks lose (32 MiB in place: 20-21.6 against
    // 11.5-21.5; 3.5-3.9 against 2.6-4.1).
    const double bytes = static_cast<double>(spec.count) * spec.elemSize;
    const bool pays = call.inPlace && fanShare(spec.root) > 0 &&
                      bytes * nranks_ / 2 >= 20.0 * (1 << 20);
    return predictUs("direct", spec, call) * (pays ? 0.6 : 1.25);
  }
  if (algorithm == "hier")
    return hosts_ > 1 ? predictHierarchical(spec.coll, nranks_, hosts_, maxLocal_,
                                            static_cast<double>(spec.count) * spec.elemSize,
                                            model_, net_)
                      : std::numeric_limits<double>::infinity();
  // Across hosts a flat algorithm's slowest hops are the network's.
  const LinkModel& link = hosts_ > 1 ? net_ : model_;
  const double n = nranks_, a = link.alphaUs, b = link.betaUsPerByte;
  const double bytes = static_cast<double>(spec.count) * spec.elemSize;
  const double logn = std::ceil(std::log2(std::max(2.0, n)));
  const bool pow2 = (nranks_ & (nranks_ - 1)) == 0;
  const std::string& al = algorithm;
  // On one host ranks read each other's memory, and the cost of a byte is the memory traffic
  // it causes: rsag moves the least (allreduce 3n-1 bytes per byte over all ranks against about
  // 5(n-1) for ring and rhd; reduce-scatter n+1 against 3(n-1)). Across hosts the bytes sent
  // decide: as many per rank as the ring's, but the host's L ranks share its network link for
  // the share (n-L)/(n-1) that leaves the host.
  const bool oneHost = hosts_ <= 1;
  const double L = maxLocal_, leavesHost = L * (n - L) / (n - 1);
  // Three ranks are the exception measured on one host (2 cores): the ring's allreduce beats
  // rsag's by 1.2x there (16 MiB busbw 3.1-3.3 against 2.5-2.8; 4, 5 and 8 ranks go the other
  // way), so rsag counts the ring's traffic.
  const double rsagAllReduce = !oneHost        ? leavesHost
                               : nranks_ == 3 ? 1.1
                                              : (3 * n - 1) / (5 * (n - 1));
  const double rsagReduceScatter = oneHost ? (n + 1) / (3 * (n - 1)) : leavesHost;
  // On one host the ring's single lane and rhd's whole-block rounds wait for their peers step by
  // step, where rsag's sends and receives run on lanes of their own (2 ranks, 16-128 MiB: ring
  // 5.5-6.0 busbw, rsag 6.7-7.3).
  const double lockstep = oneHost ? 1.1 : 1.0;
  const bool broadcast = spec.coll == Collective::kBroadcast;
  switch (spec.coll) {
    case Collective::kAllReduce:
      if (al == "rsag") return (1 + n) * a + 2 * (n - 1) / n * bytes * b * rsagAllReduce;
      if (al == "ring") return 2 * (n - 1) * a + 2 * (n - 1) / n * bytes * b * lockstep;
      if (al == "tree") return 2 * logn * a + 2 * bytes * b * 1.1;
      if (al == "rhd")
        return (2 * logn + (pow2 ? 0 : 2)) * a +
               (2 * (n - 1) / n + (pow2 ? 0 : 2)) * bytes * b * lockstep;
      // One round trip, but every rank receives and adds every input.
      if (al == "direct") return (1 + 0.25 * (n - 1)) * a + n * bytes * b;
      break;
    case Collective::kBroadcast:
    case Collective::kReduce:
      // On one host calls follow each other through a chain's hops, and each rank wakes one
      // peer per call (a tree's inner ranks two), so small broadcasts go fastest along a chain.
      // Unless ranks take turns on the cores: then every hop waits for its rank's turn (4 ranks
      // pinned two to a core, us per call at 8 B / 1 KiB / 8 KiB: chained 0.58-0.66 / 1.1-1.5 /
      // 2.8-3.1, direct 0.42-0.44 / 1.0-1.2 / 2.5-2.7; 3 ranks 0.33 / 0.8 / 2.0 against
      // 0.37 / 0.85 / 1.7).
      if (al == "ring" && broadcast && oneHost)
        return (sharedCores_ ? n - 1 : 0.9 * logn) * a + bytes * b * 1.05;
      if (al == "ring") return (n - 1) * a + bytes * b * 1.05;
      if (al == "tree") return logn * a + 2 * bytes * b;
      // One round, but the root sends (or receives and adds) every copy itself. A broadcast on
      // one host is the exception for large messages: every receiver copies from the root's
      // memory itself, at once, where a chain's copies wait for each other; small ones are
      // slower than a chain's (the root wakes every receiver: 4 ranks, 8 B-4 KiB, 1.5-4x).
      // Measured on 2 cores, us per call: 4 ranks at 16 KiB 3.0-4.4 both ways, 32 KiB 6.5-7.5
      // direct against 7.8-11.2 chained; 3 ranks at 4-8 KiB already 1.1-1.8 against 1.1-2.6.
      // Where 4 or more ranks take turns on the cores the root's copies go out in one straight
      // call and each receiver takes its turn once (us per call, 2 cores, 100000 calls: 4 ranks
      // at 8 B / 1 KiB direct 0.45 / 2.13-2.27, tree 0.50-0.52 / 2.24-2.48; 8 ranks 1.26-1.30 /
      // 6.3-7.0 both; 3 ranks stay as they were: ring 0.35 / 1.70 against direct 0.37 / 2.0).
      if (al == "direct" && broadcast && oneHost && n > 2)
        return (sharedCores_ && n > 3 ? 1.5 : n - 1) * a + 0.5 * bytes * b;
      if (al == "direct") return (1 + 0.25 * (n - 1)) * a + (n - 1) * bytes * b * 1.1;
      break;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      if (al == "ring") return (n - 1) * a + (n - 1) * bytes * b;
      if (al == "rhd") return logn * a + (n - 1) * bytes * b * (pow2 ? 1.0 : 1.5);
      if (al == "rsag") return (1 + 0.5 * (n - 1)) * a + (n - 1) * bytes * b * rsagReduceScatter;
      // All messages in flight at once; reduce-scatter adds in scratch and copies out. On one
      // host the allgather copies run with no round waiting for the one before (rhd's second
      // round waits for its first): at 4 ranks 2-3x rhd's busbw from 512 KiB up.
      if (al == "direct")
        return std::min((n - 1) * 0.7, 1 + 0.25 * (n - 1)) * a +
               (n - 1) * bytes * b *
                   (spec.coll == Collective::kReduceScatter ? 1.3 : oneHost ? 0.9 : 1.1);
      break;
    default:
      return (n - 1) * a + (n - 1) * bytes * b;
  }
  return (n - 1) * a + 2 * bytes * b * n;
}

void Selector::setLibrary(std::shared_ptr<const PlanLibrary> library, uint64_t slotBytes) {
  library_ = std::move(library);
  slotBytes_ = slotBytes;
}

void Selector::setSynthesized(std::shared_ptr<const PlanLibrary> library, uint64_t slotBytes) {
  synth_ = std::move(library);
  slotBytes_ = slotBytes;
}

// Why a call that NCCL_ALGO leaves to library plans has none.
static std::string noLibraryPlan(const LibraryQuery& q, const PlanLibrary* files,
                                 const PlanLibrary* synth) {
  std::ostringstream o;
  o << "NCCL_ALGO allows only plan library algorithms for " << plan::collectiveName(q.coll)
    << ", and no plan matches this call: " << q.nranks << " ranks, "
    << plan::sizeMultiplier(q.coll, q.nranks) * q.count * q.elemSize << " bytes ("
    << q.count << " x " << q.elemSize << "), " << (q.inPlace ? "in place" : "out of place")
    << "; windows loaded: " << (files ? files->windows() : "none");
  if (synth && !synth->empty()) o << "; synthesized: " << synth->windows();
  return o.str();
}

Choice Selector::choose(const plan::Spec& spec, const CallTraits& call) const {
  Choice best;
  double bestTime = std::numeric_limits<double>::infinity();
  for (const auto& alg : algo::all()) {
    bool ok = false;
    for (Collective c : alg.colls) ok |= c == spec.coll;
    if (!ok || !filter_.allows(spec.coll, alg.name)) continue;
    double t = predictUs(alg.name, spec, call);
    if (t < bestTime) {
      bestTime = t;
      best.algorithm = alg.name;
    }
  }
  if (best.algorithm.empty()) {
    // The override excludes everything this collective supports: fall back to the model.
    for (const auto& alg : algo::all()) {
      double t = predictUs(alg.name, spec, call);
      if (t < bestTime) {
        bestTime = t;
        best.algorithm = alg.name;
      }
    }
  }
  if (best.algorithm == "hier") best.options.hostOf = hostOf_;
  if (best.algorithm == "fan") best.options.pushShare = fanShare(spec.root);
  LibraryQuery q;
  q.coll = spec.coll;
  q.nranks = nranks_;
  q.root = spec.root;
  q.count = spec.count;
  q.elemSize = spec.elemSize;
  q.inPlace = call.inPlace;
  q.scalesInput = call.scalesInput;
  q.slotBytes = slotBytes_;
  // A forced "msccl" or "synth" leaves no built-in choice above (bestTime is the fallback's).
  const bool forced = !filter_.allows(spec.coll, best.algorithm);
  auto libraryChoice = [](const char* prefix, const LibraryPlan& hit) {
    Choice lib;
    lib.algorithm = std::string(prefix) + ":" + hit.plan->name + "#" + std::to_string(hit.id);
    lib.chunkPlan = hit.plan;
    lib.chunkPlanSource = hit.source;
    lib.pieces = !hit.streams && hit.pieces;
    return lib;
  };
  if (library_ && !library_->empty() && filter_.allows(spec.coll, kLibraryAlgorithm)) {
    const LibraryPlan* hit = library_->match(q);
    if (hit && (hit->predictedUs == 0 || forced || hit->predictedUs < bestTime))
      return libraryChoice(kLibraryAlgorithm, *hit);
  }
  if (synth_ && !synth_->empty() && filter_.allows(spec.coll, kSynthAlgorithm)) {
    if (const LibraryPlan* hit = synth_->match(q)) return libraryChoice(kSynthAlgorithm, *hit);
  }
  if (forced && (filter_.allows(spec.coll, kLibraryAlgorithm) ||
                 filter_.allows(spec.coll, kSynthAlgorithm)))
    fail(Status::kInvalidUsage, noLibraryPlan(q, library_.get(), synth_.get()));
  return best;
}

std::string Selector::table() const {
  std::ostringstream out;
  static const Collective kColls[] = {Collective::kAllReduce, Collective::kBroadcast,
                                      Collective::kReduce, Collective::kAllGather,
                                      Collective::kReduceScatter, Collective::kAlltoAll};
  out << "algorithm choice for " << nranks_ << " ranks (bytes -> algorithm):";
  for (Collective c : kColls) {
    out << "\n  " << plan::collectiveName(c) << ":";
    for (uint64_t bytes = 8; bytes <= (1ull << 28); bytes *= 32) {
      plan::Spec s;
      s.coll = c;
      s.nranks = nranks_;
      s.count = bytes / 4;
      s.elemSize = 4;
      std::string algorithm;
      try {
        algorithm = choose(s).algorithm;
      } catch (const Error&) {
        algorithm = "none";  // NCCL_ALGO allows only library plans, and none matches
      }
      out << " " << bytes << "->" << algorithm;
    }
  }
  if (library_ && !library_->empty()) out << "\n" << library_->describe();
  if (synth_ && !synth_->empty()) out << "\nsynthesized:\n" << synth_->describe();
  return out.str();
}

}  // namespace weft::select
