// The API's per-call routing: host memory keeps the host path; a stream that is neither NULL nor
// a Weft host stream is refused with a clear message where no CUDA device can run it, and the
// refusal changes nothing.
#include <gtest/gtest.h>

#include <string>

#include "nccl.h"
#include "src/cuda/driver_api.h"
#include "weft/weft.h"

namespace {

class OneRank : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ncclCommInitAll(&comm_, 1, nullptr), ncclSuccess); }
  void TearDown() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  ncclComm_t comm_ = nullptr;
  float send_[16] = {}, recv_[16] = {};
};

TEST_F(OneRank, ForeignStreamIsRefusedAndChangesNothing) {
  for (int i = 0; i < 16; ++i) send_[i] = float(i + 1);
  const auto foreign = reinterpret_cast<cudaStream_t>(0x5000);
  EXPECT_EQ(ncclAllReduce(send_, recv_, 16, ncclFloat, ncclSum, comm_, foreign),
            ncclInvalidArgument);
  const std::string message = ncclGetLastError(comm_);
  // Without a driver the stream cannot be a CUDA stream; with one, host memory cannot go on it.
  if (!weft::cuda::driver().api)
    EXPECT_NE(message.find("no CUDA device"), std::string::npos) << message;
  else
    EXPECT_NE(message.find("stream"), std::string::npos) << message;
  EXPECT_EQ(recv_[3], 0.0f);  // nothing ran
  EXPECT_EQ(ncclBroadcast(send_, recv_, 16, ncclFloat, 0, comm_, foreign), ncclInvalidArgument);
  EXPECT_EQ(ncclSend(send_, 16, ncclFloat, 0, comm_, foreign), ncclInvalidArgument);

  // The communicator is untouched: host memory on NULL and on a host stream still works.
  ASSERT_EQ(ncclAllReduce(send_, recv_, 16, ncclFloat, ncclSum, comm_, nullptr), ncclSuccess);
  EXPECT_EQ(recv_[3], 4.0f);
  cudaStream_t hostStream = nullptr;
  ASSERT_EQ(weftStreamCreate(&hostStream), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send_, send_, 16, ncclFloat, ncclSum, comm_, hostStream), ncclSuccess);
  ASSERT_EQ(weftStreamSynchronize(hostStream), ncclSuccess);
  EXPECT_EQ(send_[15], 16.0f);
  EXPECT_EQ(weftStreamDestroy(hostStream), ncclSuccess);
}

}  // namespace
