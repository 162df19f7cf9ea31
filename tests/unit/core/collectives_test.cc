// The collective correctness grid with ranks as threads of this process: every collective,
// type and op, counts around slice boundaries, in-place and out-of-place, every algorithm.
#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>

#include "nccl.h"
#include "tests/support/collective_check.h"
#include "tests/support/comms.h"
#include "tests/support/values.h"

using namespace weft::test;

namespace {

// Element count larger than one 128 KiB slot of float32, and prime.
constexpr size_t kLarge = 40009;

using GridParam = std::tuple<int, const char*>;

class CollectiveGrid : public ::testing::TestWithParam<GridParam> {
 protected:
  void SetUp() override {
    setenv("NCCL_ALGO", std::get<1>(GetParam()), 1);
    comms_ = std::make_unique<Comms>(std::get<0>(GetParam()));
    unsetenv("NCCL_ALGO");
  }
  void expectOk(const CheckCase& c) {
    CheckResult r = runCheck(comms_->get(), c);
    ASSERT_EQ(r.status, ncclSuccess) << describe(c, n()) << ": " << r.message;
    ASSERT_EQ(r.wrong, 0u) << describe(c, n()) << ": " << r.message;
  }
  int n() const { return std::get<0>(GetParam()); }
  std::vector<int> roots() const {
    std::vector<int> r{0};
    if (n() > 1) r.push_back(n() - 1);
    if (n() > 2) r.push_back(n() / 2);
    return r;
  }
  std::unique_ptr<Comms> comms_;
};

TEST_P(CollectiveGrid, ReductionsEveryTypeAndOp) {
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce})
    for (ncclDataType_t t : kAllTypes)
      for (int op : {int(ncclSum), int(ncclProd), int(ncclMax), int(ncclMin), int(ncclAvg), -1})
        for (size_t count : {size_t(1), size_t(31)})
          for (bool inPlace : {false, true}) {
            CheckCase c{coll, t, op, count, coll == Coll::kReduce ? n() - 1 : 0, inPlace};
            expectOk(c);
          }
}

TEST_P(CollectiveGrid, CountsAroundSlices) {
  for (Coll coll :
       {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce, Coll::kBroadcast, Coll::kAllGather,
        Coll::kAlltoAll, Coll::kGather, Coll::kScatter, Coll::kSendRecv})
    for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclFloat64, ncclBfloat16})
      for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(7), size_t(97), kLarge})
        for (bool inPlace : {false, true}) {
          if (inPlace && !supportsInPlace(coll)) continue;
          if (count == kLarge && t != ncclFloat32 && t != ncclInt8) continue;
          CheckCase c{coll, t, ncclSum, count, 0, inPlace};
          expectOk(c);
        }
}

TEST_P(CollectiveGrid, RootsAndThreads) {
  for (Coll coll : {Coll::kBroadcast, Coll::kReduce, Coll::kGather, Coll::kScatter})
    for (int root : roots())
      for (bool threads : {false, true}) {
        CheckCase c{coll, ncclFloat32, ncclSum, 1031, root, false, threads};
        expectOk(c);
      }
  for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kAlltoAll,
                    Coll::kSendRecv}) {
    CheckCase c{coll, ncclInt32, ncclSum, 4099, 0, false, true};
    expectOk(c);
  }
}

std::string gridName(const ::testing::TestParamInfo<GridParam>& info) {
  return "n" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Threads, CollectiveGrid,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 7, 8, 13, 16),
                                            ::testing::Values("ring", "tree", "rhd", "direct",
                                                              "rsag")),
                         gridName);

}  // namespace
