// A test fixture for (rank count, NCCL_ALGO) parameters: SetUp builds that many ranks in this
// process with that algorithm, TearDown destroys them. Suites set their environment in
// SetUpTestSuite, before the first communicator reads it.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "nccl.h"
#include "tests/support/collective_check.h"

namespace weft::test {

using RanksAlgo = std::tuple<int, const char*>;

class RanksAlgoTest : public ::testing::TestWithParam<RanksAlgo> {
 protected:
  void SetUp() override {
    comms_.resize(std::get<0>(GetParam()));
    ASSERT_EQ(initAllWithAlgo(comms_, std::get<1>(GetParam())), ncclSuccess)
        << ncclGetLastError(nullptr);
  }
  void TearDown() override {
    for (auto c : comms_)
      if (c) ncclCommDestroy(c);
  }
  std::vector<ncclComm_t> comms_;
};

// "n<ranks>_<algo>", for INSTANTIATE_TEST_SUITE_P.
inline std::string ranksAlgoName(const ::testing::TestParamInfo<RanksAlgo>& info) {
  return "n" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
}

}  // namespace weft::test
