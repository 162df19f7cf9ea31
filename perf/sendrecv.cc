// sendrecv_perf: each rank sends to rank+1 and receives from rank-1 in one group;
// busbw = algbw. In place has no defined result: that column's #wrong prints N/A.
#include "perf/perf_main.h"

namespace weft::perf {
namespace {

class SendRecv final : public Collective {
 public:
  CollCounts counts(size_t count, int) const override { return {count, count, count, 0, 0}; }
  ncclResult_t run(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                   int, ncclComm_t comm, cudaStream_t stream) const override {
    int n = 0, rank = 0;
    ncclResult_t r = ncclCommCount(comm, &n);
    if (r == ncclSuccess) r = ncclCommUserRank(comm, &rank);
    if (r != ncclSuccess) return r;
    if ((r = ncclGroupStart()) != ncclSuccess) return r;
    r = ncclSend(send, count, type, (rank + 1) % n, comm, stream);
    if (r == ncclSuccess) r = ncclRecv(recv, count, type, (rank - 1 + n) % n, comm, stream);
    ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  }
  double algBytes(size_t count, size_t typeSize, int) const override {
    return static_cast<double>(count * typeSize);
  }
  double busFactor(int) const override { return 1.0; }
  Pattern pattern() const override { return Pattern::kSendRecv; }
  double input(const DataView& v, size_t i) const override { return v.input(v.rank, i); }
  Expect expected(const DataView& v, size_t k) const override {
    return {v.input((v.rank - 1 + v.nranks) % v.nranks, k), 0};
  }
  bool checksInPlace() const override { return false; }
};

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) { return weft::perf::perfMain(argc, argv, weft::perf::SendRecv()); }
