// A connected pair of ib transport connections on real verbs for a test: skipped unless
// WEFT_TEST_IB is set (tests/vm sets it where an RDMA port is active, over soft-RoCE).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "tests/conformance/pair_harness.h"
#include "transports/ib/connection.h"

namespace weft::test {

class IbPairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (getenv("WEFT_TEST_IB") == nullptr)
      GTEST_SKIP() << "set WEFT_TEST_IB=1 where an RDMA port is active (tests/vm does)";
    setenv("NCCL_NET", "IB", 1);
    pair_ = std::make_unique<TransportPair>("ib");
  }
  void TearDown() override {
    pair_.reset();
    unsetenv("NCCL_NET");
  }
  static ib::IbConnection& ib(TransportPair::Conn& c) {
    return dynamic_cast<ib::IbConnection&>(*c);
  }
  std::unique_ptr<TransportPair> pair_;
};

}  // namespace weft::test
