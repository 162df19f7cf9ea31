// A call whose peer never comes fails after WEFT_TIMEOUT_MS without progress, and its error
// names the rank, the peer it waited for, the operation and how long it waited.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <vector>

#include "nccl.h"
#include "weft/weft.h"

namespace {

TEST(Timeout, ErrorNamesRankPeerOperationAndWait) {
  ::setenv("WEFT_TIMEOUT_MS", "400", 1);  // read at init
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  ::unsetenv("WEFT_TIMEOUT_MS");
  std::vector<float> in(1000, 1.0f), out(1000);
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 never calls: rank 0 sends its part and then waits for rank 1's.
  EXPECT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat, ncclSum, comms[0], nullptr),
            ncclRemoteError);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(400));
  EXPECT_LT(waited, std::chrono::seconds(30));
  const std::string error = ncclGetLastError(comms[0]);
  EXPECT_NE(error.find("rank 0 timed out after 400 ms"), std::string::npos) << error;
  EXPECT_NE(error.find("allreduce of 1000 float"), std::string::npos) << error;
  EXPECT_NE(error.find("waiting for rank 1"), std::string::npos) << error;
  EXPECT_NE(error.find("WEFT_TIMEOUT_MS"), std::string::npos) << error;
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(Timeout, DefaultIsOneMinuteWithoutProgress) {
  ::unsetenv("WEFT_TIMEOUT_MS");
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  char text[4096] = {};
  ASSERT_GT(weftCommTuning(comm, text, sizeof(text)), 0u);
  EXPECT_NE(std::string(text).find("timeout 60000 ms"), std::string::npos) << text;
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
