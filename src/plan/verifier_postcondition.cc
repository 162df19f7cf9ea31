// The plan verifier's postcondition: after the run, every output element holds the ranks'
// contributions to the element index the collective puts there.
#include "src/plan/verifier_internal.h"

namespace weft::plan::detail {

std::string Simulator::maskText(const uint64_t* mask) const {
  std::string s = "{";
  int shown = 0;
  for (int r = 0; r < n_; ++r)
    if (mask[r / 64] >> (r % 64) & 1) s += (shown++ ? "," : "") + std::to_string(r);
  return s + "}";
}

void Simulator::checkPostcondition() {
  const Spec& spec = plan_.spec;
  if (spec.coll == Collective::kSendRecv) return;
  const uint64_t c = spec.count;
  std::vector<uint64_t> want(words_);
  for (int r = 0; r < n_; ++r) {
    if ((spec.coll == Collective::kReduce || spec.coll == Collective::kGather) && r != spec.root)
      continue;
    const Arena& a = arenas_[r];
    const uint64_t outSize = bufferSizes(spec, r).output;
    for (uint64_t i = 0; i < outSize; ++i) {
      uint64_t idx = i;
      int single = -1;  // -1: every rank contributes
      switch (spec.coll) {
        case Collective::kAllReduce:
        case Collective::kReduce:
          break;
        case Collective::kReduceScatter:
          idx = r * c + i;
          break;
        case Collective::kAllGather:
        case Collective::kGather:
          single = i / c;
          idx = i % c;
          break;
        case Collective::kBroadcast:
          single = spec.root;
          break;
        case Collective::kAlltoAll:
          single = i / c;
          idx = r * c + i % c;
          break;
        case Collective::kScatter:
          single = spec.root;
          idx = r * c + i;
          break;
        case Collective::kSendRecv:
          break;
      }
      std::fill(want.begin(), want.end(), 0);
      for (int s = 0; s < n_; ++s)
        if (single < 0 || s == single) want[s / 64] |= uint64_t{1} << (s % 64);
      const uint64_t e = a.base[kOutput] + i;
      std::string at = mode() + "postcondition of " + collectiveName(spec.coll) + ": rank " +
                       std::to_string(r) + " output[" + std::to_string(i) + "]";
      // An in-place-only plan may leave a rank's own input where it already is (allgather).
      const bool holds = a.state[e] == Arena::kValue || a.state[e] == Arena::kOrigCopied ||
                         (inPlaceOnly_ && a.state[e] == Arena::kOrig);
      if (!holds) reject(at + " is never written");
      if (a.idx[e] != idx || !std::equal(want.begin(), want.end(), &a.mask[e * words_]))
        reject(at + " holds ranks " + maskText(&a.mask[e * words_]) + " of element " +
               std::to_string(a.idx[e]) + ", expected ranks " + maskText(want.data()) +
               " of element " + std::to_string(idx));
    }
  }
}

}  // namespace weft::plan::detail
