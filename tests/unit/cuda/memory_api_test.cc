// ncclMemAlloc and ncclCommRegister through libweft in a process that never made a CUDA
// context: host memory and the host registration path, whatever driver this machine has.
#include <gtest/gtest.h>

#include <cstring>

#include "nccl.h"

namespace {

TEST(DeviceMemoryApi, NoContextPathsThroughTheApi) {
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 12345), ncclSuccess);
  std::memset(p, 1, 12345);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(comm, p, 12345, &handle), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(comm, handle), ncclInvalidArgument);
  ncclCommDestroy(comm);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
}

}  // namespace
