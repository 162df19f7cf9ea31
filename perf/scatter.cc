// scatter_perf: ncclScatter from -r root; count = elements each rank receives;
// busbw = algbw * (n-1)/n.
#include "perf/perf_main.h"

namespace weft::perf {
namespace {

class Scatter final : public Collective {
 public:
  bool rooted() const override { return true; }
  CollCounts counts(size_t count, int n) const override {
    const size_t base = count / static_cast<size_t>(n);
    return {base * n, base, base, 0, base};
  }
  ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                   int root, ncclComm_t comm, cudaStream_t stream) const override {
    return ncclScatter(send, recv, count, type, root, comm, stream);
  }
  double algBytes(size_t count, size_t typeSize, int n) const override {
    return static_cast<double>(count * typeSize) * n;
  }
  double busFactor(int n) const override { return static_cast<double>(n - 1) / n; }
  Pattern pattern() const override { return Pattern::kScatter; }
  double input(const DataView& v, size_t i) const override { return v.input(v.rank, i); }
  // My block of the root's input.
  Expect expected(const DataView& v, size_t k) const override {
    return {v.input(v.root, v.rank * v.count + k), 0};
  }
};

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) { return weft::perf::perfMain(argc, argv, weft::perf::Scatter()); }
