// all_gather_perf: ncclAllGather; count = elements each rank sends; busbw = algbw * (n-1)/n.
#include "perf/perf_main.h"

namespace weft::perf {
namespace {

class AllGather final : public Collective {
 public:
  CollCounts counts(size_t count, int n) const override {
    const size_t base = count / static_cast<size_t>(n);
    return {base, base * n, base, base, 0};
  }
  ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                   int, ncclComm_t comm, cudaStream_t stream) const override {
    return ncclAllGather(send, recv, count, type, comm, stream);
  }
  double algBytes(size_t count, size_t typeSize, int n) const override {
    return static_cast<double>(count * typeSize) * n;
  }
  double busFactor(int n) const override { return static_cast<double>(n - 1) / n; }
  Pattern pattern() const override { return Pattern::kAllGather; }
  // Rank r contributes elements [r * count, (r + 1) * count) of one global array.
  double input(const DataView& v, size_t i) const override {
    return v.input(v.rank, v.rank * v.count + i);
  }
  Expect expected(const DataView& v, size_t k) const override {
    return {v.input(static_cast<int>(k / v.count), k), 0};
  }
};

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) {
  return weft::perf::perfMain(argc, argv, weft::perf::AllGather());
}
