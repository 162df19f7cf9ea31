// The plan verifier's elements: how a rank's buffers lie in memory (aliasing in place), the
// symbolic values steps read, write and reduce, and races between lanes that no dependency orders.
#include "src/plan/verifier_internal.h"

namespace weft::plan::detail {

void Simulator::setupArenas() {
  const Spec& spec = plan_.spec;
  arenas_.resize(n_);
  for (int r = 0; r < n_; ++r) {
    const Program& p = plan_.programs[r];
    BufferSizes sz = bufferSizes(spec, r);
    Arena& a = arenas_[r];
    a.base.assign(kExtra + p.extraElems.size(), 0);
    uint64_t c = spec.count, end = 0;
    bool aliased = false;
    if (inPlace_) {
      aliased = true;
      switch (spec.coll) {
        case Collective::kAllGather:
          a.base[kInput] = r * c;
          break;
        case Collective::kReduceScatter:
          a.base[kOutput] = r * c;
          break;
        case Collective::kGather:
          if (r == spec.root)
            a.base[kInput] = r * c;
          else
            aliased = false;
          break;
        case Collective::kScatter:
          if (r == spec.root)
            a.base[kOutput] = r * c;
          else
            aliased = false;
          break;
        case Collective::kSendRecv:
          aliased = false;
          break;
        default:
          break;  // same pointer
      }
    }
    if (aliased) {
      end = std::max(a.base[kInput] + sz.input, a.base[kOutput] + sz.output);
    } else {
      a.base[kInput] = 0;
      a.base[kOutput] = sz.input;
      end = sz.input + sz.output;
    }
    a.base[kScratch] = end;
    end += p.scratchElems;
    for (size_t x = 0; x < p.extraElems.size(); ++x) {
      a.base[kExtra + x] = end;
      end += p.extraElems[x];
    }
    a.state.assign(end, Arena::kUninit);
    a.idx.assign(end, 0);
    a.mask.assign(end * words_, 0);
    a.writer.assign(end, Access{});
    a.readers.resize(end);
    auto initial = [&](uint64_t e, uint64_t index, uint8_t state) {
      a.state[e] = state;
      a.idx[e] = index;
      a.mask[e * words_ + r / 64] |= uint64_t{1} << (r % 64);
    };
    for (uint64_t i = 0; i < sz.input; ++i) initial(a.base[kInput] + i, i, Arena::kOrig);
    for (size_t x = 0; x < p.extraElems.size(); ++x)
      for (uint64_t i = 0; i < p.extraElems[x]; ++i)
        initial(a.base[kExtra + x] + i, i, Arena::kValue);
  }
}

// Whether step `prev` has ended before lane g's current point (happens-before).
bool Simulator::ordered(size_t g, int32_t prev) const {
  return prev < 0 || ordered(g, Access{prev, endStamp(gIndex_[prev])});
}

// Whether an access has finished before lane g's current point.
bool Simulator::ordered(size_t g, const Access& x) const {
  if (x.step < 0) return true;
  size_t pl = gLane_[x.step];
  return pl == g || lanes_[g].vc[pl] >= x.done;
}

void Simulator::access(size_t g, int32_t me, const Ref& ref, uint64_t i, bool write) {
  Arena& a = arenas_[lanes_[g].rank];
  uint64_t e = a.base[ref.buffer] + ref.offset + i;
  auto race = [&](int32_t other, const char* what) {
    reject(mode() + describe(me) + (write ? " writes " : " reads ") + bufferText(ref.buffer) + "[" +
           std::to_string(ref.offset + i) + "] while " + describe(other) + " may still " + what +
           " it: no dependency orders the two lanes");
  };
  if (!ordered(g, a.writer[e])) race(a.writer[e].step, "write");
  auto& rd = a.readers[e];
  const Access mine{me, accessDone_};
  if (write) {
    for (const Access& o : rd)
      if (!ordered(g, o)) race(o.step, "read");
    rd.clear();
    a.writer[e] = mine;
  } else {
    for (Access& o : rd)
      if (gLane_[o.step] == g) {
        o = mine;
        return;
      }
    rd.push_back(mine);
  }
}

Values Simulator::read(size_t g, int32_t me, const Ref& ref, uint64_t off, uint64_t count) {
  Arena& a = arenas_[lanes_[g].rank];
  Values v;
  v.idx.resize(count);
  v.mask.resize(count * words_);
  for (uint64_t i = 0; i < count; ++i) {
    access(g, me, ref, off + i, false);
    uint64_t e = a.base[ref.buffer] + ref.offset + off + i;
    auto at = [&] {
      return bufferText(ref.buffer) + "[" + std::to_string(ref.offset + off + i) + "]";
    };
    if (inPlaceOnly_) {
      // Input and output are one buffer: any element holding data may be read through either.
      if (a.state[e] == Arena::kUninit)
        reject(mode() + describe(me) + " reads " + at() + ", which holds no value yet");
    } else if (ref.buffer == kInput) {
      if (a.state[e] != Arena::kOrig && a.state[e] != Arena::kOrigCopied)
        reject(mode() + describe(me) + " reads " + at() +
               " after it was overwritten (input and output alias in place)");
    } else if (a.state[e] == Arena::kUninit) {
      reject(mode() + describe(me) + " reads " + at() + ", which holds no value yet");
    } else if (a.state[e] == Arena::kOrig) {
      reject(mode() + describe(me) + " reads " + at() +
             ", which still holds the original input: read it through the input buffer");
    }
    v.idx[i] = a.idx[e];
    std::copy_n(&a.mask[e * words_], words_, &v.mask[i * words_]);
  }
  return v;
}

void Simulator::write(size_t g, int32_t me, const Ref& ref, uint64_t off, const Values& v) {
  Arena& a = arenas_[lanes_[g].rank];
  for (uint64_t i = 0; i < v.idx.size(); ++i) {
    access(g, me, ref, off + i, true);
    uint64_t e = a.base[ref.buffer] + ref.offset + off + i;
    a.state[e] = Arena::kValue;
    a.idx[e] = v.idx[i];
    std::copy_n(&v.mask[i * words_], words_, &a.mask[e * words_]);
  }
}

void Simulator::reduce(int32_t me, Values& acc, const Values& other) {
  for (size_t i = 0; i < acc.idx.size(); ++i) {
    if (acc.idx[i] != other.idx[i])
      reject(mode() + describe(me) + " combines copies of element " + std::to_string(acc.idx[i]) +
             " and element " + std::to_string(other.idx[i]) + " (slice element " +
             std::to_string(i) + ")");
    for (int w = 0; w < words_; ++w) {
      uint64_t both = acc.mask[i * words_ + w] & other.mask[i * words_ + w];
      if (both)
        reject(mode() + describe(me) + " counts rank " +
               std::to_string(w * 64 + __builtin_ctzll(both)) + "'s contribution to element " +
               std::to_string(acc.idx[i]) + " twice");
      acc.mask[i * words_ + w] |= other.mask[i * words_ + w];
    }
  }
}

bool Simulator::sameElements(size_t g, const Ref& a, const Ref& b) const {
  const Arena& ar = arenas_[lanes_[g].rank];
  return ar.base[a.buffer] + a.offset == ar.base[b.buffer] + b.offset;
}

// The executor skips a copy onto itself unless it scales (PreMulSum, only for reductions, which
// then really rewrite the memory): the elements keep their data and become readable through
// the destination buffer too.
void Simulator::copyInPlace(size_t g, int32_t me, const Step& st) {
  Arena& a = arenas_[lanes_[g].rank];
  read(g, me, st.src, 0, st.count);
  for (uint64_t i = 0; i < st.count; ++i) {
    uint64_t e = a.base[st.dst.buffer] + st.dst.offset + i;
    if (a.state[e] == Arena::kOrig) a.state[e] = Arena::kOrigCopied;
  }
}

// src and dst of one step may be the same elements, never partly overlapping ones.
void Simulator::checkOverlap(size_t g, int32_t me, const Step& st) {
  if (!opReadsSrc(st.op) || !opWritesDst(st.op) || st.count == 0) return;
  const Arena& a = arenas_[lanes_[g].rank];
  uint64_t s = a.base[st.src.buffer] + st.src.offset, d = a.base[st.dst.buffer] + st.dst.offset;
  if (s != d && s < d + st.count && d < s + st.count)
    reject(mode() + describe(me) + ": src and dst overlap without being the same elements");
}

}  // namespace weft::plan::detail
