#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tests/soak/soak_calls.h"
#include "tests/soak/soak_codec.h"

namespace soak {

// First element at which `got` differs from `table` read from entry k onwards, or -1.
static long long firstDifference(const uint8_t* got, size_t n, const uint8_t* table, size_t period,
                                 size_t k, size_t elem) {
  size_t done = 0;
  while (done < n) {
    size_t run = std::min(n - done, period - k);
    if (std::memcmp(got + done * elem, table + k * elem, run * elem) != 0) {
      for (size_t j = 0; j < run; ++j)
        if (std::memcmp(got + (done + j) * elem, table + (k + j) * elem, elem) != 0)
          return static_cast<long long>(done + j);
    }
    done += run;
    k = 0;
  }
  return -1;
}

long long CallRun::firstInputMismatch(const uint8_t* got, int r, size_t first, size_t n) const {
  const auto& t = !cappedTable_.empty() && r >= kProdCappedFromRank ? cappedTable_ : table_;
  return firstDifference(got, n, t.data(), period_, (first + offset_[r]) % period_, elem_);
}

long long CallRun::firstReducedMismatch(const uint8_t* got, size_t first, size_t n) const {
  if (avgSum_.empty())
    return firstDifference(got, n, reduced_.data(), period_, first % period_, elem_);
  // Floating Avg: the sum of inputs each scaled by a rounded 1/n, rounded at every step.
  const double u = unitRoundoff(c_.type), tiny = smallestSubnormal(c_.type);
  for (size_t j = 0; j < n; ++j) {
    const size_t k = (first + j) % period_;
    const double want = avgSum_[k] / n_;
    const double tolerance = (n_ + 3) * u * avgAbs_[k] / n_ + n_ * tiny;
    const double have = decode(c_.type, got + j * elem_);
    if (!(std::fabs(have - want) <= tolerance)) return static_cast<long long>(j);
  }
  return -1;
}

std::string CallRun::mismatch(const char* what, long long at, const uint8_t* got,
                              size_t first) const {
  char text[256];
  int len = std::snprintf(text, sizeof(text), "%s: element %lld (of block from %zu) is 0x", what,
                          at, first);
  for (size_t b = elem_; b-- > 0 && len < 200;)
    len += std::snprintf(text + len, sizeof(text) - len, "%02x", got[at * elem_ + b]);
  if (!avgSum_.empty() && std::string(what).find("result") != std::string::npos) {
    const size_t k = (first + at) % period_;
    std::snprintf(text + len, sizeof(text) - len, " (%g, want %g)",
                  decode(c_.type, got + at * elem_), avgSum_[k] / n_);
  }
  return text;
}

std::string CallRun::checkGuards(const Buffer& b, const char* name) const {
  if (!b.base) return "";
  for (size_t i = 0; i < b.lead; ++i)
    if (b.base[i] != kGuard) return std::string("wrote before the ") + name + " buffer";
  const uint8_t* tail = b.base + b.lead + b.bytes;
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (tail[i] != kGuard) return std::string("wrote past the end of the ") + name + " buffer";
  return "";
}

ncclResult_t CallRun::issue(ncclComm_t comm) {
  const size_t n = c_.count;
  const ncclDataType_t t = c_.type;
  switch (c_.kind) {
    case Kind::kAllReduce:
      return ncclAllReduce(send_, recv_, n, t, c_.op, comm, nullptr);
    case Kind::kBroadcast:
      return ncclBroadcast(send_, recv_, n, t, c_.root, comm, nullptr);
    case Kind::kReduce:
      return ncclReduce(send_, recv_, n, t, c_.op, c_.root, comm, nullptr);
    case Kind::kAllGather:
      return ncclAllGather(send_, recv_, n, t, comm, nullptr);
    case Kind::kReduceScatter:
      return ncclReduceScatter(send_, recv_, n, t, c_.op, comm, nullptr);
    case Kind::kAlltoAll:
      return ncclAlltoAll(send_, recv_, n, t, comm, nullptr);
    case Kind::kGather:
      return ncclGather(send_, recv_, n, t, c_.root, comm, nullptr);
    case Kind::kScatter:
      return ncclScatter(send_, recv_, n, t, c_.root, comm, nullptr);
    case Kind::kSendRecv: {
      int from = 0;
      while (c_.peerOf[from] != rank_) ++from;
      ncclResult_t first = ncclGroupStart();
      if (first == ncclSuccess) first = ncclSend(send_, n, t, c_.peerOf[rank_], comm, nullptr);
      if (first == ncclSuccess) first = ncclRecv(recv_, n, t, from, comm, nullptr);
      const ncclResult_t end = ncclGroupEnd();  // always: the group must be closed
      return first != ncclSuccess ? first : end;
    }
    default:
      return ncclInvalidUsage;
  }
}

std::string CallRun::checkUntouched(const uint8_t* p, size_t n, const char* what) const {
  for (size_t i = 0; i < n * elem_; ++i)
    if (p[i] != kUnwritten) return std::string("wrote the ") + what + ", which it must not";
  return "";
}

std::string CallRun::checkOutput() const {
  const size_t count = c_.count, block = count * elem_;
  const bool root = rank_ == c_.root;
  long long at;
  switch (c_.kind) {
    case Kind::kAllReduce:
      at = firstReducedMismatch(recv_, 0, count);
      return at < 0 ? "" : mismatch("wrong result", at, recv_, 0);
    case Kind::kReduce:
      if (!root)
        return inPlace_ ? "" : checkUntouched(recv_, count, "receive buffer of a non-root");
      at = firstReducedMismatch(recv_, 0, count);
      return at < 0 ? "" : mismatch("wrong result", at, recv_, 0);
    case Kind::kReduceScatter:
      at = firstReducedMismatch(recv_, rank_ * count, count);
      return at < 0 ? "" : mismatch("wrong result", at, recv_, rank_ * count);
    case Kind::kBroadcast:
      at = firstInputMismatch(recv_, c_.root, 0, count);
      return at < 0 ? "" : mismatch("wrong result (root's data)", at, recv_, 0);
    case Kind::kScatter:
      at = firstInputMismatch(recv_, c_.root, rank_ * count, count);
      return at < 0 ? "" : mismatch("wrong result (root's block)", at, recv_, rank_ * count);
    case Kind::kSendRecv: {
      int from = 0;
      while (c_.peerOf[from] != rank_) ++from;
      at = firstInputMismatch(recv_, from, 0, count);
      return at < 0 ? "" : mismatch("wrong result (sender's data)", at, recv_, 0);
    }
    case Kind::kGather:
      if (!root) return checkUntouched(recv_, 1, "receive buffer of a non-root");
      [[fallthrough]];
    case Kind::kAllGather:
    case Kind::kAlltoAll:
      for (int s = 0; s < n_; ++s) {
        const size_t first = c_.kind == Kind::kAlltoAll ? rank_ * count : 0;
        at = firstInputMismatch(recv_ + s * block, s, first, count);
        if (at >= 0) {
          char what[64];
          std::snprintf(what, sizeof(what), "wrong result in the block from rank %d", s);
          return mismatch(what, at, recv_ + s * block, first);
        }
      }
      return "";
    default:
      return "unknown collective";
  }
}

std::string CallRun::check() const {
  std::string why = checkGuards(sendBuf_, "send");
  if (why.empty()) why = checkGuards(recvBuf_, "receive");
  if (why.empty()) why = checkOutput();
  // Inputs the call only reads stay as they were (in place, the output overwrote them; a
  // non-root's in-place reduce only reads its buffer).
  const bool inputIsOutput = inPlace_ && !(c_.kind == Kind::kReduce && rank_ != c_.root);
  if (why.empty() && !inputIsOutput) {
    long long at = firstInputMismatch(send_, rank_, 0, sendElems());
    if (at >= 0) why = mismatch("changed its input", at, send_, 0);
  }
  return why.empty() ? "" : c_.describe() + ": " + why;
}

}  // namespace soak
