// Collectives whose outputs are written with streaming (non-temporal) stores: the threshold is
// lowered to one byte before the first communicator, so every output takes that path, in place
// and out of place, with destinations at every alignment, for every algorithm.
#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>

#include "nccl.h"
#include "tests/support/collective_check.h"
#include "tests/support/ranks_algo_fixture.h"

using namespace weft::test;

namespace {

class StreamingOutput : public RanksAlgoTest {
 protected:
  static void SetUpTestSuite() {
    setenv("WEFT_STREAM_BYTES", "1", 1);
    setenv("WEFT_STREAM_REDUCE_BYTES", "1", 1);
    setenv("WEFT_STREAM_ALLREDUCE_BYTES", "1", 1);
  }
};

TEST_P(StreamingOutput, EveryCollectiveIsExact) {
  const int n = std::get<0>(GetParam());
  // Odd counts put chunk boundaries (and so destinations) off 64-byte lines; 40009 floats span
  // several slices; 1 and 17 are shorter than one line.
  for (Coll coll :
       {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce, Coll::kBroadcast, Coll::kAllGather,
        Coll::kAlltoAll, Coll::kGather, Coll::kScatter, Coll::kSendRecv})
    for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclBfloat16})
      for (size_t count : {size_t(1), size_t(17), size_t(1031), size_t(40009)})
        for (bool inPlace : {false, true}) {
          if (inPlace && !supportsInPlace(coll)) continue;
          CheckCase c{coll, t, ncclSum, count, n - 1, inPlace};
          CheckResult r = runCheck(comms_, c);
          ASSERT_EQ(r.status, ncclSuccess) << describe(c, n) << ": " << r.message;
          ASSERT_EQ(r.wrong, 0u) << describe(c, n) << ": " << r.message;
        }
}

INSTANTIATE_TEST_SUITE_P(Threads, StreamingOutput,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values("ring", "tree", "rhd", "direct",
                                                              "rsag")),
                         ranksAlgoName);

}  // namespace
