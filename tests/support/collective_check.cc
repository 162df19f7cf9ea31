#include "tests/support/collective_check.h"

#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/values.h"

namespace weft::test {

const char* collName(Coll c) {
  static const char* k[] = {"allreduce", "broadcast", "reduce",  "allgather", "reducescatter",
                            "alltoall",  "gather",    "scatter", "sendrecv"};
  return k[static_cast<int>(c)];
}
bool isReduction(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}
bool supportsInPlace(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kBroadcast || c == Coll::kReduce ||
         c == Coll::kAllGather || c == Coll::kReduceScatter;
}

std::string describe(const CheckCase& c, int nranks) {
  std::ostringstream o;
  o << collName(c.coll) << " n=" << nranks << " type=" << typeName(c.type)
    << " op=" << (c.op < 0 ? "premulsum" : opName(c.op)) << " count=" << c.count
    << " root=" << c.root << (c.inPlace ? " in-place" : " out-of-place")
    << (c.threads ? " threads" : " group");
  return o.str();
}

namespace {

// Buffers come from ncclMemAlloc when WEFT_TEST_MEMALLOC=1: then shm peers read them in place.
class TestBuffer {
 public:
  void assign(size_t bytes, int value) {
    static const bool shared = std::getenv("WEFT_TEST_MEMALLOC") != nullptr &&
                               std::string(std::getenv("WEFT_TEST_MEMALLOC")) == "1";
    mem_.reset();
    void* p = nullptr;
    if (shared) {
      if (ncclMemAlloc(&p, bytes) != ncclSuccess) throw std::bad_alloc();
      mem_ = {static_cast<char*>(p), [](char* q) { ncclMemFree(q); }};
    } else {
      mem_ = {new char[bytes], [](char* q) { delete[] q; }};
    }
    std::memset(mem_.get(), value, bytes);
  }
  char* data() { return mem_.get(); }

 private:
  std::unique_ptr<char, void (*)(char*)> mem_{nullptr, [](char*) {}};
};

struct RankBuffers {
  TestBuffer send, recv;
  const void* sendPtr = nullptr;
  void* recvPtr = nullptr;
  const void* resultPtr = nullptr;  // where this rank's result lands
  std::vector<double> want;
};

// Input / output element counts of rank r.
void sizesFor(const CheckCase& c, int n, int r, size_t* in, size_t* out) {
  const size_t k = c.count;
  switch (c.coll) {
    case Coll::kAllGather:
      *in = k;
      *out = k * n;
      break;
    case Coll::kReduceScatter:
      *in = k * n;
      *out = k;
      break;
    case Coll::kAlltoAll:
      *in = k * n;
      *out = k * n;
      break;
    case Coll::kGather:
      *in = k;
      *out = r == c.root ? k * n : 0;
      break;
    case Coll::kScatter:
      *in = r == c.root ? k * n : 0;
      *out = k;
      break;
    default:
      *in = k;
      *out = k;
      break;
  }
}

RankBuffers prepare(const CheckCase& c, int n, int r, int valueOp) {
  RankBuffers b;
  const size_t es = typeSize(c.type), k = c.count;
  size_t in = 0, out = 0;
  sizesFor(c, n, r, &in, &out);
  const int src = (r - 1 + n) % n;
  // Input values: data movement uses rank r's formula; reductions use the op's formula.
  if (c.inPlace) {
    size_t total = std::max(in, out);
    b.recv.assign(std::max<size_t>(1, total * es), 0);
    char* base = b.recv.data();
    size_t inOffset = c.coll == Coll::kAllGather ? r * k : 0;
    fill(c.type, valueOp, r, base + inOffset * es, in);
    b.sendPtr = base + inOffset * es;
    b.recvPtr = c.coll == Coll::kReduceScatter ? base + r * k * es : base;
  } else {
    b.send.assign(std::max<size_t>(1, in * es), 0);
    b.recv.assign(std::max<size_t>(1, out * es), 0x5a);
    fill(c.type, valueOp, r, b.send.data(), in);
    b.sendPtr = b.send.data();
    b.recvPtr = b.recv.data();
  }
  b.resultPtr = b.recvPtr;
  double premul = c.op < 0 ? 2.0 : 0.0;
  int op = c.op < 0 ? ncclSum : c.op;
  switch (c.coll) {
    case Coll::kAllReduce:
      for (size_t i = 0; i < k; ++i) b.want.push_back(expectedReduce(c.type, op, n, i, premul));
      break;
    case Coll::kReduce:
      if (r == c.root)
        for (size_t i = 0; i < k; ++i) b.want.push_back(expectedReduce(c.type, op, n, i, premul));
      break;
    case Coll::kReduceScatter:
      for (size_t i = 0; i < k; ++i)
        b.want.push_back(expectedReduce(c.type, op, n, r * k + i, premul));
      break;
    case Coll::kBroadcast:
      for (size_t i = 0; i < k; ++i) b.want.push_back(inputValue(c.type, valueOp, c.root, i));
      break;
    case Coll::kAllGather:
      for (int s = 0; s < n; ++s)
        for (size_t i = 0; i < k; ++i) b.want.push_back(inputValue(c.type, valueOp, s, i));
      break;
    case Coll::kAlltoAll:
      for (int s = 0; s < n; ++s)
        for (size_t i = 0; i < k; ++i) b.want.push_back(inputValue(c.type, valueOp, s, r * k + i));
      break;
    case Coll::kGather:
      if (r == c.root)
        for (int s = 0; s < n; ++s)
          for (size_t i = 0; i < k; ++i) b.want.push_back(inputValue(c.type, valueOp, s, i));
      break;
    case Coll::kScatter:
      for (size_t i = 0; i < k; ++i)
        b.want.push_back(inputValue(c.type, valueOp, c.root, r * k + i));
      break;
    case Coll::kSendRecv:
      for (size_t i = 0; i < k; ++i) b.want.push_back(inputValue(c.type, valueOp, src, i));
      break;
  }
  return b;
}

ncclResult_t issue(const CheckCase& c, ncclComm_t comm, int r, int n, RankBuffers& b, int op) {
  const auto t = c.type;
  const size_t k = c.count;
  switch (c.coll) {
    case Coll::kAllReduce:
      return ncclAllReduce(b.sendPtr, b.recvPtr, k, t, static_cast<ncclRedOp_t>(op), comm, nullptr);
    case Coll::kBroadcast:
      if (c.inPlace) return ncclBcast(b.recvPtr, k, t, c.root, comm, nullptr);
      return ncclBroadcast(b.sendPtr, b.recvPtr, k, t, c.root, comm, nullptr);
    case Coll::kReduce:
      return ncclReduce(b.sendPtr, b.recvPtr, k, t, static_cast<ncclRedOp_t>(op), c.root, comm,
                        nullptr);
    case Coll::kAllGather:
      return ncclAllGather(b.sendPtr, b.recvPtr, k, t, comm, nullptr);
    case Coll::kReduceScatter:
      return ncclReduceScatter(b.sendPtr, b.recvPtr, k, t, static_cast<ncclRedOp_t>(op), comm,
                               nullptr);
    case Coll::kAlltoAll:
      return ncclAlltoAll(b.sendPtr, b.recvPtr, k, t, comm, nullptr);
    case Coll::kGather:
      return ncclGather(b.sendPtr, b.recvPtr, k, t, c.root, comm, nullptr);
    case Coll::kScatter:
      return ncclScatter(b.sendPtr, b.recvPtr, k, t, c.root, comm, nullptr);
    case Coll::kSendRecv: {
      ncclResult_t res = ncclGroupStart();
      if (res == ncclSuccess) res = ncclSend(b.sendPtr, k, t, (r + 1) % n, comm, nullptr);
      if (res == ncclSuccess) res = ncclRecv(b.recvPtr, k, t, (r - 1 + n) % n, comm, nullptr);
      ncclResult_t end = ncclGroupEnd();
      return res != ncclSuccess ? res : end;
    }
  }
  return ncclInternalError;
}

}  // namespace

CheckResult runCheckRanks(const std::vector<ncclComm_t>& comms, const std::vector<int>& myRanks,
                          int n, const CheckCase& c) {
  CheckResult result;
  const int valueOp = isReduction(c.coll) ? (c.op < 0 ? ncclSum : c.op) : ncclMax;
  std::vector<RankBuffers> bufs;
  std::vector<int> ops(myRanks.size(), c.op);
  for (size_t j = 0; j < myRanks.size(); ++j) {
    bufs.push_back(prepare(c, n, myRanks[j], valueOp));
    if (c.op < 0 && isReduction(c.coll)) {
      // PreMulSum by 2, the scalar in the element type.
      std::vector<char> scalar(8);
      store(c.type, scalar.data(), 0, 2.0);
      ncclRedOp_t op;
      ncclResult_t res =
          ncclRedOpCreatePreMulSum(&op, scalar.data(), c.type, ncclScalarHostImmediate, comms[j]);
      if (res != ncclSuccess) return {res, 0, "ncclRedOpCreatePreMulSum failed"};
      ops[j] = op;
    }
  }
  std::vector<ncclResult_t> res(myRanks.size(), ncclSuccess);
  if (c.threads) {
    std::vector<std::thread> th;
    for (size_t j = 0; j < myRanks.size(); ++j)
      th.emplace_back([&, j] { res[j] = issue(c, comms[j], myRanks[j], n, bufs[j], ops[j]); });
    for (auto& t : th) t.join();
  } else {
    ncclGroupStart();
    for (size_t j = 0; j < myRanks.size(); ++j)
      res[j] = issue(c, comms[j], myRanks[j], n, bufs[j], ops[j]);
    ncclResult_t end = ncclGroupEnd();
    for (auto& r : res)
      if (r == ncclSuccess) r = end;
  }
  for (size_t j = 0; j < myRanks.size(); ++j) {
    if (c.op < 0 && isReduction(c.coll))
      ncclRedOpDestroy(static_cast<ncclRedOp_t>(ops[j]), comms[j]);
    if (res[j] != ncclSuccess) {
      result.status = res[j];
      result.message = "rank " + std::to_string(myRanks[j]) + ": " + ncclGetErrorString(res[j]) +
                       " / " + ncclGetLastError(comms[j]);
      return result;
    }
    uint64_t wrong =
        countWrong(c.type, c.op < 0 ? ncclSum : c.op, bufs[j].resultPtr, bufs[j].want, n);
    if (wrong && result.wrong == 0) {
      result.message = "rank " + std::to_string(myRanks[j]) + " has " + std::to_string(wrong) +
                       " wrong elements";
      for (size_t i = 0; i < bufs[j].want.size(); ++i) {
        double g = load(c.type, bufs[j].resultPtr, i);
        if (g != bufs[j].want[i]) {
          result.message += "; first at " + std::to_string(i) + ": got " + std::to_string(g) +
                            " want " + std::to_string(bufs[j].want[i]);
          break;
        }
      }
    }
    result.wrong += wrong;
  }
  return result;
}

ncclResult_t initAllWithAlgo(std::vector<ncclComm_t>& comms, const char* algo) {
  const char* before = std::getenv("NCCL_ALGO");
  const std::string saved = before ? before : "";
  setenv("NCCL_ALGO", algo, 1);
  const ncclResult_t r = ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), nullptr);
  if (before)
    setenv("NCCL_ALGO", saved.c_str(), 1);
  else
    unsetenv("NCCL_ALGO");
  return r;
}

CheckResult runCheck(const std::vector<ncclComm_t>& comms, const CheckCase& c) {
  std::vector<int> ranks(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) ranks[i] = static_cast<int>(i);
  return runCheckRanks(comms, ranks, static_cast<int>(comms.size()), c);
}

}  // namespace weft::test
