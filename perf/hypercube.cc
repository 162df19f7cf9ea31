// hypercube_perf: an allgather built from log2(n) rounds of pairwise ncclSend/ncclRecv (rank
// exchanges everything it has with rank ^ mask); power-of-two rank counts only.
// algbw = count * (n-1) bytes / time; busbw = algbw.
#include <cstring>
#include <string>

#include "perf/perf_main.h"
#include "weft/weft.h"

namespace weft::perf {
namespace {

constexpr size_t kAlign = 4;  // elements per rank are a multiple of this

class HyperCube final : public Collective {
 public:
  CollCounts counts(size_t count, int n) const override {
    const size_t base = count / (kAlign * static_cast<size_t>(n)) * kAlign;
    return {base, base * n, base, base, 0};
  }
  ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                   int root, ncclComm_t comm, cudaStream_t stream) const override {
    int n = 0;
    ncclResult_t r = ncclCommCount(comm, &n);
    for (int round = 0; r == ncclSuccess && round < rounds(n); ++round)
      r = runRound(round, send, recv, count, type, op, root, comm, stream);
    return r;
  }
  int rounds(int n) const override {
    int r = 1;
    while ((1 << r) < n) ++r;
    return r;
  }
  // Round k exchanges 2^k blocks with rank ^ 2^k.
  ncclResult_t runRound(int round, const void* send, void* recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t, int, ncclComm_t comm, cudaStream_t stream) const override {
    int n = 0, rank = 0;
    ncclResult_t r = ncclCommCount(comm, &n);
    if (r == ncclSuccess) r = ncclCommUserRank(comm, &rank);
    if (r != ncclSuccess || count == 0) return r;
    const size_t block = count * typeInfo(type).size;
    char* out = static_cast<char*>(recv);
    char* mine = out + static_cast<size_t>(rank) * block;
    if (round == 0 && mine != send) {
      // Out of place: place my block first. Host streams take no memcpy, so wait for the
      // stream's earlier calls (which may still read this buffer) and copy here.
      if (stream && (r = weftStreamSynchronize(stream)) != ncclSuccess) return r;
      std::memcpy(mine, send, block);
    }
    const int mask = 1 << round;
    if (mask >= n) return ncclSuccess;
    const int have = rank & ~(mask - 1);  // first block I hold
    const int get = have ^ mask;          // first block the peer holds
    const int peer = rank ^ mask;
    if ((r = ncclGroupStart()) != ncclSuccess) return r;
    r = ncclSend(out + have * block, count * mask, type, peer, comm, stream);
    if (r == ncclSuccess) r = ncclRecv(out + get * block, count * mask, type, peer, comm, stream);
    ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  }
  double algBytes(size_t count, size_t typeSize, int n) const override {
    return static_cast<double>(count * typeSize) * (n - 1);
  }
  double busFactor(int) const override { return 1.0; }
  double input(const DataView& v, size_t i) const override { return v.input(v.rank, i); }
  Expect expected(const DataView& v, size_t k) const override {
    return {v.input(static_cast<int>(k / v.count), k % v.count), 0};
  }
  std::string unsupported(int n) const override {
    if (n > 0 && (n & (n - 1)) == 0) return "";
    return "nRanks " + std::to_string(n) + " is not a power of 2, skipping";
  }
};

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) {
  return weft::perf::perfMain(argc, argv, weft::perf::HyperCube());
}
