#include "tests/soak/soak_calls.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tests/soak/soak_codec.h"
#include "tests/soak/soak_random.h"

namespace soak {
namespace {

constexpr size_t kMaxPeriod = 65521;  // prime: chunk boundaries never line up with it

// The range reduction inputs are drawn from: every partial result stays exact in the type.
struct Range {
  int64_t lo, hi;
};
Range rangeFor(ncclDataType_t t, ncclRedOp_t op) {
  const bool u = isUnsigned(t);
  if (op == ncclMax || op == ncclMin) return u ? Range{0, 15} : Range{-8, 8};
  if (op == ncclProd) return u ? Range{1, 2} : Range{-1, 2};  // 0 drawn as -1 below
  // Sum and Avg: eight ranks' magnitudes add up to at most 24 (e4m3: 16, e5m2: 8), all exact.
  if (u) return {0, 3};
  if (t == ncclFloat8e5m2) return {-1, 1};
  if (t == ncclFloat8e4m3) return {-2, 2};
  return {-3, 3};
}

int64_t combine(ncclRedOp_t op, int64_t a, int64_t b) {
  switch (op) {
    case ncclProd:
      return a * b;
    case ncclMax:
      return std::max(a, b);
    case ncclMin:
      return std::min(a, b);
    default:
      return a + b;
  }
}

}  // namespace

const char* kindName(Kind k) {
  static const char* const kNames[] = {"allreduce", "broadcast",     "reduce",
                                       "allgather", "reducescatter", "alltoall",
                                       "gather",    "scatter",       "sendrecv"};
  return k < Kind::kNumKinds ? kNames[static_cast<int>(k)] : "?";
}

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

bool Call::reduces() const {
  return kind == Kind::kAllReduce || kind == Kind::kReduce || kind == Kind::kReduceScatter;
}

std::string Call::describe() const {
  static const char* const kOps[] = {"sum", "prod", "max", "min", "avg"};
  char text[160];
  std::snprintf(text, sizeof(text), "%s type=%d op=%s count=%zu %s root=%d align=%d/%d",
                kindName(kind), static_cast<int>(type), reduces() ? kOps[op] : "-", count,
                inPlace ? "in-place" : "out-of-place", root, sendAlign, recvAlign);
  return text;
}

// Elements of the send and receive buffers per rank, as multiples of count: {send, recv}.
static std::pair<int, int> multiples(Kind k, int nranks) {
  switch (k) {
    case Kind::kAllGather:
    case Kind::kGather:
      return {1, nranks};
    case Kind::kReduceScatter:
    case Kind::kScatter:
      return {nranks, 1};
    case Kind::kAlltoAll:
      return {nranks, nranks};
    default:
      return {1, 1};
  }
}

// Mostly small counts, sometimes large: the machine running the soak stays usable.
static size_t drawCount(Rng& rng, size_t maxCount) {
  const double r = rng.uniform();
  size_t lo, hi;
  if (r < 0.05) return 0;
  if (r < 0.65) {
    lo = 1, hi = 64;
  } else if (r < 0.92) {
    lo = 65, hi = 8192;
  } else if (r < 0.995) {
    lo = 8193, hi = 256 << 10;
  } else {
    lo = (256 << 10) + 1, hi = maxCount;
  }
  hi = std::min(hi, maxCount);
  if (lo > hi) return hi;
  return rng.logUniform(lo, hi);
}

Call drawCall(uint64_t jobSeed, int index, int calls, int nranks, const CallLimits& limits) {
  Rng rng(mix(jobSeed, 0x63616c6cull + static_cast<uint64_t>(index)));
  static const int kWeights[] = {25, 10, 10, 12, 12, 8, 6, 6, 11};
  Call c;
  if (index == calls - 1) {
    c.kind = Kind::kAllReduce;
  } else {
    int total = 0;
    for (int w : kWeights) total += w;
    int pick = static_cast<int>(rng.below(total));
    int k = 0;
    while (pick >= kWeights[k]) pick -= kWeights[k++];
    c.kind = static_cast<Kind>(k);
  }
  c.type = static_cast<ncclDataType_t>(rng.below(ncclNumTypes));
  c.op = static_cast<ncclRedOp_t>(rng.below(ncclNumOps));
  c.count = drawCount(rng, limits.maxCount);
  auto [sendMult, recvMult] = multiples(c.kind, nranks);
  const size_t perCount = static_cast<size_t>(nranks) * (sendMult + recvMult) * typeSize(c.type);
  c.count = std::min(c.count, limits.maxJobBytes / perCount);
  if (index == calls - 1) c.count = std::max<size_t>(c.count, 1);  // a count of 0 needs no peer
  c.inPlace = c.kind != Kind::kAlltoAll && c.kind != Kind::kSendRecv && rng.below(10) < 4;
  c.root = static_cast<int>(rng.below(nranks));
  c.salt = rng.next();
  c.sendAlign = static_cast<int>(rng.below(4));
  c.recvAlign = static_cast<int>(rng.below(4));
  int order[kMaxRanks];
  for (int r = 0; r < nranks; ++r) order[r] = r;
  for (int r = nranks - 1; r > 0; --r) std::swap(order[r], order[rng.below(r + 1)]);
  for (int r = 0; r < nranks; ++r) c.peerOf[r] = static_cast<int8_t>(order[r]);
  return c;
}

// ---- CallRun ----

CallRun::CallRun(const Call& call, int rank, int nranks)
    : c_(call), rank_(rank), n_(nranks), elem_(typeSize(call.type)) {
  buildTables();
  const bool root = rank_ == c_.root;
  const size_t count = c_.count;
  const size_t sendN = sendElems(), recvN = recvElems();
  // In place: one allocation, the other pointer a block of it (NCCL's in-place layouts).
  const bool inPlace = inPlace_ =
      c_.inPlace &&
      (c_.kind == Kind::kAllReduce || c_.kind == Kind::kBroadcast || c_.kind == Kind::kReduce ||
       c_.kind == Kind::kAllGather || c_.kind == Kind::kReduceScatter ||
       ((c_.kind == Kind::kGather || c_.kind == Kind::kScatter) && root));
  if (!inPlace) {
    sendBuf_ = allocate(sendN, c_.sendAlign);
    recvBuf_ = allocate(recvN, c_.recvAlign);
    send_ = sendBuf_.data();
    recv_ = recvBuf_.data();
  } else if (sendN >= recvN) {
    sendBuf_ = allocate(sendN, c_.sendAlign);
    send_ = sendBuf_.data();
    const size_t block = c_.kind == Kind::kReduceScatter ? rank_
                         : c_.kind == Kind::kScatter     ? c_.root
                                                         : 0;
    recv_ = send_ + block * count * elem_;
  } else {
    recvBuf_ = allocate(recvN, c_.recvAlign);
    recv_ = recvBuf_.data();
    const size_t block = c_.kind == Kind::kAllGather ? rank_ : c_.root;
    send_ = recv_ + block * count * elem_;
  }
  if (recvBuf_.base) std::memset(recv_, kUnwritten, recvN * elem_);
  if (sendBuf_.base) std::memset(send_, kUnwritten, sendN * elem_);
  fillInput(send_, rank_, 0, sendN);
}

CallRun::~CallRun() {
  release(sendBuf_);
  release(recvBuf_);
}

size_t CallRun::sendElems() const {
  auto [s, r] = multiples(c_.kind, n_);
  if (c_.kind == Kind::kScatter && rank_ != c_.root) return 1;
  return s * c_.count;
}

size_t CallRun::recvElems() const {
  auto [s, r] = multiples(c_.kind, n_);
  if (c_.kind == Kind::kGather && rank_ != c_.root) return 1;
  return r * c_.count;
}

CallRun::Buffer CallRun::allocate(size_t elems, int alignElems) {
  // Own mappings, returned on release: the soak's RSS measures the library, not malloc's caches.
  Buffer b;
  b.bytes = elems * elem_;
  b.lead = kGuardBytes + alignElems * elem_;
  b.mapped = b.lead + b.bytes + kGuardBytes;
  void* p = mmap(nullptr, b.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  b.base = static_cast<uint8_t*>(p);
  std::memset(b.base, kGuard, b.lead);
  std::memset(b.base + b.lead + b.bytes, kGuard, kGuardBytes);
  return b;
}

void CallRun::release(Buffer& b) {
  if (b.base) munmap(b.base, b.mapped);
  b = Buffer{};
}

void CallRun::buildTables() {
  size_t most = std::max(sendElems(), recvElems());
  most = std::max<size_t>(most, static_cast<size_t>(n_) * c_.count);
  period_ = std::clamp<size_t>(most, 1, kMaxPeriod);
  Rng rng(mix(c_.salt, 0x7461626cull));
  offset_.resize(n_);
  for (int r = 0; r < n_; ++r) offset_[r] = rng.below(period_);
  table_.resize(period_ * elem_);
  if (!c_.reduces()) {
    for (size_t k = 0; k < period_; ++k) {
      uint64_t bits = rng.next();
      std::memcpy(&table_[k * elem_], &bits, elem_);
    }
    return;
  }
  const Range range = rangeFor(c_.type, c_.op);
  std::vector<int64_t> values(period_);
  for (auto& v : values) {
    v = range.lo + static_cast<int64_t>(rng.below(range.hi - range.lo + 1));
    if (c_.op == ncclProd && v == 0) v = -1;
    if (c_.op == ncclProd && isUnsigned(c_.type)) v = v < 1 ? 1 : v;
  }
  auto capped = [&](int r, int64_t v) {
    return c_.op == ncclProd && r >= kProdCappedFromRank && v == 2 ? int64_t{1} : v;
  };
  for (size_t k = 0; k < period_; ++k) encode(c_.type, values[k], &table_[k * elem_]);
  if (c_.op == ncclProd && n_ > kProdCappedFromRank) {
    cappedTable_.resize(period_ * elem_);
    for (size_t k = 0; k < period_; ++k)
      encode(c_.type, capped(kProdCappedFromRank, values[k]), &cappedTable_[k * elem_]);
  }
  // The reduction of element i depends on i % period only.
  const bool floatAvg = c_.op == ncclAvg && isFloat(c_.type);
  reduced_.resize(period_ * elem_);
  if (floatAvg) avgSum_.resize(period_), avgAbs_.resize(period_);
  for (size_t k = 0; k < period_; ++k) {
    int64_t acc = 0, abs = 0;
    for (int r = 0; r < n_; ++r) {
      int64_t v = capped(r, values[(k + offset_[r]) % period_]);
      acc = r == 0 ? v : combine(c_.op, acc, v);
      abs += v < 0 ? -v : v;
    }
    if (c_.op == ncclAvg && !floatAvg) acc /= n_;  // integers: sum, then C division
    if (floatAvg) avgSum_[k] = static_cast<double>(acc), avgAbs_[k] = static_cast<double>(abs);
    encode(c_.type, acc, &reduced_[k * elem_]);
  }
}

const uint8_t* CallRun::value(int r, size_t i) const {
  const auto& t = !cappedTable_.empty() && r >= kProdCappedFromRank ? cappedTable_ : table_;
  return &t[((i + offset_[r]) % period_) * elem_];
}

void CallRun::fillInput(uint8_t* dst, int r, size_t first, size_t n) const {
  const auto& t = !cappedTable_.empty() && r >= kProdCappedFromRank ? cappedTable_ : table_;
  size_t k = (first + offset_[r]) % period_;
  while (n > 0) {
    size_t run = std::min(n, period_ - k);
    std::memcpy(dst, &t[k * elem_], run * elem_);
    dst += run * elem_;
    n -= run;
    k = 0;
  }
}

}  // namespace soak
