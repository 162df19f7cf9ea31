#include "src/select/selector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
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

AlgoFilter::AlgoFilter(const std::string& text) : text_(text) {
  std::stringstream all(text);
  std::string part;
  while (std::getline(all, part, ';')) {
    if (part.empty()) continue;
    Rule rule;
    size_t colon = part.find(':');
    if (colon != std::string::npos) {
      if (!parseCollective(part.substr(0, colon), &rule.coll)) {
        WEFT_WARN(TUNING, "NCCL_ALGO: unknown collective '%s' ignored",
                  part.substr(0, colon).c_str());
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
    if (!r.allCollectives && r.coll == c)
      chosen = &r;
    else if (r.allCollectives && (!chosen || chosen->allCollectives))
      chosen = &r;
  }
  if (!chosen) return true;
  bool listed = false;
  for (const auto& n : chosen->names) listed |= n == algorithm;
  return chosen->exclude ? !listed : listed;
}

const AlgorithmInfo& info(Algorithm a) {
  for (const AlgorithmInfo& i : kAlgorithms)
    if (i.id == a) return i;
  return kAlgorithms[0];
}

std::optional<Algorithm> algorithmNamed(std::string_view name) {
  for (const AlgorithmInfo& i : kAlgorithms)
    if (name == i.name) return i.id;
  return std::nullopt;
}

static synth::AlphaBeta alphaBeta(const LinkModel& m) { return {m.alphaUs, m.betaUsPerByte}; }

Selector::Selector(int nranks, LinkModel model, AlgoFilter filter)
    : nranks_(nranks), model_(model), filter_(std::move(filter)) {
  view_.nranks = nranks;
  view_.local = alphaBeta(model_);
  for (const algo::Algorithm& alg : algo::all())
    if (std::optional<Algorithm> id = algorithmNamed(alg.name)) candidates_.push_back({&alg, *id});
}

void Selector::setHosts(const std::vector<int>& hostOf, LinkModel net) {
  std::map<int, int> perHost;
  for (int h : hostOf) ++perHost[h];
  hosts_ = static_cast<int>(perHost.size());
  maxLocal_ = 1;
  for (auto& [h, count] : perHost) maxLocal_ = std::max(maxLocal_, count);
  hostOf_ = static_cast<int>(hostOf.size()) == nranks_ && hosts_ > 1 ? hostOf : std::vector<int>{};
  if (hostOf_.empty()) hosts_ = maxLocal_ = 1;
  net_ = net;
  view_.hosts = hosts_;
  view_.maxLocal = maxLocal_;
  view_.net = alphaBeta(net_);
}

double Selector::fanShare(int root) const {
  if (!sharedCores_ || hosts_ > 1 || nranks_ < 3 ||
      coreOf_.size() != static_cast<size_t>(nranks_) || root < 0 || root >= nranks_ ||
      coreOf_[root] < 0)
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

bool Selector::applies(const Window& w, const plan::Spec& spec, const CallTraits& call) const {
  const bool oneHost = hosts_ <= 1, pow2 = (nranks_ & (nranks_ - 1)) == 0;
  if ((w.hosts == Hosts::kOne && !oneHost) || (w.hosts == Hosts::kSeveral && oneHost)) return false;
  if ((w.cores == Cores::kShared && !sharedCores_) || (w.cores == Cores::kOwn && sharedCores_))
    return false;
  if (nranks_ < w.minRanks || nranks_ > w.maxRanks) return false;
  if ((w.rankCount == RankCount::kPowerOf2 && !pow2) ||
      (w.rankCount == RankCount::kNotPowerOf2 && pow2))
    return false;
  if (w.fanStreamBytes > 0) {
    const double bytes = static_cast<double>(spec.count) * spec.elemSize;
    if (!call.inPlace || fanShare(spec.root) <= 0 || bytes * nranks_ / 2 < w.fanStreamBytes)
      return false;
  }
  return true;
}

Score Selector::score(Algorithm algorithm, const plan::Spec& spec, const CallTraits& call) const {
  Score out;
  out.algorithm = algorithm;
  const AlgorithmInfo& self = info(algorithm);
  const AlgorithmInfo& base = info(self.costedAs);
  const double bytes = static_cast<double>(spec.count) * spec.elemSize;
  synth::ClosedForm form;
  if (algo::supports(self.name, spec.coll))
    form = synth::closedForm(base.shape, spec.coll, view_, bytes);
  out.modelUs = out.us = form.timeUs(view_);
  if (!form.supported) return out;
  // Factor rows multiply; an override row replaces the model's term and the factor rows'.
  const double n = nranks_;
  double scale = 1, localScale = 1, time = 1;
  bool scaleSet = false, localScaleSet = false, timeSet = false;
  for (const Correction& row : kCorrections) {
    if (row.coll != spec.coll || (row.algorithm != self.id && row.algorithm != base.id) ||
        !applies(row.window, spec, call))
      continue;
    ++out.corrections;
    auto apply = [&row](double* factor, bool* set) {
      if (row.override) {
        *factor = row.value;
        *set = true;
      } else if (!*set) {
        *factor *= row.value;
      }
    };
    switch (row.term) {
      case Term::kSteps:
        form.flat.steps =
            row.value + row.perPeer * (n - 1) + row.perRound * synth::log2Rounds(nranks_);
        break;
      case Term::kBytes:
        form.flat.bytes = row.value * bytes;
        break;
      case Term::kScale:
        apply(&scale, &scaleSet);
        break;
      case Term::kLocalScale:
        apply(&localScale, &localScaleSet);
        break;
      case Term::kTime:
        apply(&time, &timeSet);
        break;
    }
  }
  form.flat.scale = scaleSet ? scale : form.flat.scale * scale;
  form.local.scale = localScaleSet ? localScale : form.local.scale * localScale;
  out.us = form.timeUs(view_) * time;
  return out;
}

double Selector::predictUs(const std::string& algorithm, const plan::Spec& spec,
                           const CallTraits& call) const {
  const std::optional<Algorithm> id = algorithmNamed(algorithm);
  return id ? score(*id, spec, call).us : std::numeric_limits<double>::infinity();
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
static std::string noLibraryPlan(const LibraryQuery& q, const std::string& filter,
                                 const PlanLibrary* files, const PlanLibrary* synth) {
  std::ostringstream o;
  o << "NCCL_ALGO=" << filter << " leaves no built-in algorithm for "
    << plan::collectiveName(q.coll) << ", and no plan matches this call: " << q.nranks << " ranks, "
    << plan::sizeMultiplier(q.coll, q.nranks) * q.count * q.elemSize << " bytes (" << q.count
    << " x " << q.elemSize << "), " << (q.inPlace ? "in place" : "out of place")
    << "; windows loaded: " << (files ? files->windows() : "none");
  if (synth && !synth->empty()) o << "; synthesized: " << synth->windows();
  return o.str();
}

Choice Selector::choose(const plan::Spec& spec, const CallTraits& call) const {
  Choice best;
  double bestTime = std::numeric_limits<double>::infinity();
  std::optional<Algorithm> bestId;
  for (const auto& [alg, id] : candidates_) {
    bool ok = false;
    for (Collective c : alg->colls) ok |= c == spec.coll;
    if (!ok || !filter_.allows(spec.coll, alg->name)) continue;
    double t = score(id, spec, call).us;
    if (t < bestTime) {
      bestTime = t;
      bestId = id;
    }
  }
  if (!bestId) {
    // The override excludes everything this collective supports: fall back to the model.
    for (const auto& [alg, id] : candidates_) {
      double t = score(id, spec, call).us;
      if (t < bestTime) {
        bestTime = t;
        bestId = id;
      }
    }
  }
  if (bestId) best.algorithm = info(*bestId).name;
  if (bestId == Algorithm::kHier) best.options.hostOf = hostOf_;
  if (bestId == Algorithm::kFan) best.options.pushShare = fanShare(spec.root);
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
  if (forced &&
      (filter_.allows(spec.coll, kLibraryAlgorithm) || filter_.allows(spec.coll, kSynthAlgorithm)))
    fail(Status::kInvalidUsage, noLibraryPlan(q, filter_.text(), library_.get(), synth_.get()));
  return best;
}

static std::string microseconds(double us) {
  char text[32];
  std::snprintf(text, sizeof(text), us < 1e4 ? "%.4g" : "%.0f", us);
  return text;
}

// "12.5" where no row applies, "12.5>13.8" where rows changed the model's time, "-" where the
// algorithm cannot build the call.
static std::string scoreCell(const Score& score) {
  if (std::isinf(score.modelUs) || std::isnan(score.modelUs)) return "-";
  if (score.corrections == 0 || score.us == score.modelUs) return microseconds(score.modelUs);
  return microseconds(score.modelUs) + ">" + microseconds(score.us);
}

std::string Selector::table() const {
  std::ostringstream out;
  static const Collective kColls[] = {Collective::kAllReduce,     Collective::kBroadcast,
                                      Collective::kReduce,        Collective::kAllGather,
                                      Collective::kReduceScatter, Collective::kAlltoAll,
                                      Collective::kGather,        Collective::kScatter};
  out << "algorithm scores for " << nranks_ << " ranks on " << hosts_ << " host(s)"
      << (sharedCores_ ? ", ranks sharing cores" : "")
      << ": us per call of float32 data out of place from root 0, as synth/model's closed form "
         "gives it, 'a>b' where rows of src/select/corrections.h make it b; the pick last";
  for (Collective c : kColls) {
    std::vector<Algorithm> columns;
    for (const auto& [alg, id] : candidates_)
      if (algo::supports(alg->name, c)) columns.push_back(id);
    std::ostringstream head;
    head << "\n  " << std::left << std::setw(14) << plan::collectiveName(c) << std::right;
    for (Algorithm a : columns) head << " " << std::setw(19) << info(a).name;
    out << head.str() << "  pick";
    for (uint64_t bytes = 8; bytes <= (1ull << 30); bytes *= 8) {
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
      out << "\n  " << std::setw(14) << bytes;
      for (Algorithm a : columns) out << " " << std::setw(19) << scoreCell(score(a, s));
      out << "  " << algorithm;
    }
  }
  if (library_ && !library_->empty()) out << "\n" << library_->describe();
  if (synth_ && !synth_->empty()) out << "\nsynthesized:\n" << synth_->describe();
  return out.str();
}

}  // namespace weft::select
