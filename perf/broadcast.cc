// broadcast_perf: ncclBroadcast from -r root; busbw = algbw.
#include "perf/perf_main.h"

namespace weft::perf {
namespace {

class Broadcast final : public Collective {
 public:
  bool rooted() const override { return true; }
  CollCounts counts(size_t count, int) const override { return {count, count, count, 0, 0}; }
  ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                   int root, ncclComm_t comm, cudaStream_t stream) const override {
    return ncclBroadcast(send, recv, count, type, root, comm, stream);
  }
  double algBytes(size_t count, size_t typeSize, int) const override {
    return static_cast<double>(count * typeSize);
  }
  double busFactor(int) const override { return 1.0; }
  Pattern pattern() const override { return Pattern::kBroadcast; }
  // Every rank fills its send buffer (with its own values) so a wrong source shows up.
  double input(const DataView& v, size_t i) const override { return v.input(v.rank, i); }
  Expect expected(const DataView& v, size_t k) const override { return {v.input(v.root, k), 0}; }
};

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) {
  return weft::perf::perfMain(argc, argv, weft::perf::Broadcast());
}
