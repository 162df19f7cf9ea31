// reduce_perf: ncclReduce to -r root; busbw = algbw.
#include "perf/perf_main.h"

namespace weft::perf {
namespace {

class Reduce final : public Collective {
 public:
  bool reduces() const override { return true; }
  bool rooted() const override { return true; }
  CollCounts counts(size_t count, int) const override { return {count, count, count, 0, 0}; }
  ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                   int root, ncclComm_t comm, cudaStream_t stream) const override {
    return ncclReduce(send, recv, count, type, op, root, comm, stream);
  }
  double algBytes(size_t count, size_t typeSize, int) const override {
    return static_cast<double>(count * typeSize);
  }
  double busFactor(int) const override { return 1.0; }
  Pattern pattern() const override { return Pattern::kReduce; }
  double input(const DataView& v, size_t i) const override { return v.input(v.rank, i); }
  // Only the root's buffer changes.
  Expect expected(const DataView& v, size_t k) const override {
    return v.rank == v.root ? v.reduced(k) : v.unchanged(k);
  }
};

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) { return weft::perf::perfMain(argc, argv, weft::perf::Reduce()); }
