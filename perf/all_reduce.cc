// all_reduce_perf: ncclAllReduce; busbw = algbw * 2(n-1)/n.
#include "perf/perf_main.h"

namespace weft::perf {
namespace {

class AllReduce final : public Collective {
 public:
  bool reduces() const override { return true; }
  CollCounts counts(size_t count, int) const override { return {count, count, count, 0, 0}; }
  ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                   int, ncclComm_t comm, cudaStream_t stream) const override {
    return ncclAllReduce(send, recv, count, type, op, comm, stream);
  }
  double algBytes(size_t count, size_t typeSize, int) const override {
    return static_cast<double>(count * typeSize);
  }
  double busFactor(int n) const override { return 2.0 * (n - 1) / n; }
  Pattern pattern() const override { return Pattern::kAllReduce; }
  double input(const DataView& v, size_t i) const override { return v.input(v.rank, i); }
  Expect expected(const DataView& v, size_t k) const override { return v.reduced(k); }
};

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) {
  return weft::perf::perfMain(argc, argv, weft::perf::AllReduce());
}
