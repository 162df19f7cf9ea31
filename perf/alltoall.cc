// alltoall_perf: ncclAlltoAll; count = elements per peer; busbw = algbw * (n-1)/n.
// In place has no defined result (as in nccl-tests): that column's #wrong prints N/A.
#include "perf/perf_main.h"

namespace weft::perf {
namespace {

class AlltoAll final : public Collective {
 public:
  CollCounts counts(size_t count, int n) const override {
    const size_t base = count / static_cast<size_t>(n);
    return {base * n, base * n, base, 0, 0};
  }
  ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                   int, ncclComm_t comm, cudaStream_t stream) const override {
    return ncclAlltoAll(send, recv, count, type, comm, stream);
  }
  double algBytes(size_t count, size_t typeSize, int n) const override {
    return static_cast<double>(count * typeSize) * n;
  }
  double busFactor(int n) const override { return static_cast<double>(n - 1) / n; }
  Pattern pattern() const override { return Pattern::kAlltoall; }
  double input(const DataView& v, size_t i) const override { return v.input(v.rank, i); }
  // Block p of my output is block `rank` of rank p's input.
  Expect expected(const DataView& v, size_t k) const override {
    const size_t p = k / v.count, j = k % v.count;
    return {v.input(static_cast<int>(p), v.rank * v.count + j), 0};
  }
  bool checksInPlace() const override { return false; }
};

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) { return weft::perf::perfMain(argc, argv, weft::perf::AlltoAll()); }
