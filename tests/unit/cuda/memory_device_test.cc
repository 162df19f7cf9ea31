// ncclMemAlloc and ncclCommRegister's device branches (src/cuda/memory.h): host memory where
// there is no driver or no current CUDA context (today's behaviour), device memory on the
// current context's GPU otherwise (fake driver), and device registrations with their
// descriptors.
#include <gtest/gtest.h>

#include <cstring>

#include "src/cuda/memory.h"
#include "tests/unit/cuda/fake_cuda_driver.h"
#include "transports/cuda/allocation.h"

namespace weft::cuda {
namespace {

namespace fake = weft::cuda::fake;

class DeviceMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::state().canAccess = {{1, 1}, {1, 1}};
    api_ = fake::table();
  }
  weft::cuda::DriverApi api_;
};

TEST_F(DeviceMemory, NoDriverOrNoContextAllocatesHostMemory) {
  for (const weft::cuda::DriverApi* api : {static_cast<const weft::cuda::DriverApi*>(nullptr),
                                           static_cast<const weft::cuda::DriverApi*>(&api_)}) {
    fake::state().contextCurrent = false;
    auto* p = static_cast<unsigned char*>(memAlloc(api, 10000));
    std::memset(p, 3, 10000);  // host memory: the host writes it
    EXPECT_EQ(transport::cuda::deviceAllocationCount(), 0u);
    EXPECT_TRUE(fake::state().handles.empty());
    memFree(api, p);
  }
  EXPECT_THROW(memAlloc(nullptr, 0), Error);
  int notOurs = 0;
  EXPECT_THROW(memFree(nullptr, &notOurs), Error);
}

TEST_F(DeviceMemory, CurrentContextOnAGpuAllocatesThere) {
  fake::state().currentDevice = 1;
  void* p = memAlloc(&api_, 5000);
  transport::cuda::DeviceAllocation a;
  ASSERT_TRUE(transport::cuda::findDeviceAllocation(p, &a));
  EXPECT_EQ(a.device, 1);
  EXPECT_TRUE(a.cuMem);
  EXPECT_EQ(a.bytes, fake::state().granularity);
  EXPECT_EQ(fake::state().lastProp.location.id, 1);
  memFree(&api_, p);
  EXPECT_EQ(transport::cuda::deviceAllocationCount(), 0u);
  EXPECT_TRUE(fake::state().handles.empty());
}

TEST_F(DeviceMemory, RegisteringDeviceBuffersRecordsTheirDescriptor) {
  const int owner = 0;  // stands for a communicator
  auto* p = static_cast<char*>(memAlloc(&api_, 3 * 4096));
  EXPECT_TRUE(registerDeviceBuffer(&owner, &api_, p + 4096, 4096));
  EXPECT_EQ(deviceRegistrationCount(&owner), 1u);
  DeviceRegistration reg;
  ASSERT_TRUE(findDeviceRegistration(&owner, p + 4096 + 100, 200, &reg));
  EXPECT_EQ(reg.buff, p + 4096);
  EXPECT_EQ(reg.descriptor.offset, 4096u);
  EXPECT_EQ(reg.descriptor.length, 4096u);
  EXPECT_EQ(reg.descriptor.kind, static_cast<uint16_t>(transport::cuda::IpcKind::kCuMemFd));
  EXPECT_FALSE(findDeviceRegistration(&owner, p + 4096 + 100, 4096, &reg));  // runs past it
  EXPECT_FALSE(findDeviceRegistration(&owner, p, 16, &reg));
  const int other = 0;
  EXPECT_FALSE(findDeviceRegistration(&other, p + 4096, 16, &reg));

  // Host memory keeps the host path.
  char host[64];
  EXPECT_FALSE(registerDeviceBuffer(&owner, &api_, host, sizeof host));
  EXPECT_FALSE(registerDeviceBuffer(&owner, nullptr, p, 16));

  EXPECT_TRUE(deregisterDeviceBuffer(&owner, p + 4096));
  EXPECT_FALSE(deregisterDeviceBuffer(&owner, p + 4096));
  EXPECT_TRUE(registerDeviceBuffer(&owner, &api_, p, 16));
  dropDeviceRegistrations(&owner);
  EXPECT_EQ(deviceRegistrationCount(&owner), 0u);
  memFree(&api_, p);
}

TEST_F(DeviceMemory, UnexportableDeviceBufferFailsRegistrationWithAReason) {
  const int owner = 0;
  auto* p = static_cast<char*>(memAlloc(&api_, 4096));
  EXPECT_THROW(
      {
        try {
          registerDeviceBuffer(&owner, &api_, p, 1 << 30);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("leaves its allocation"), std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  EXPECT_EQ(deviceRegistrationCount(&owner), 0u);
  memFree(&api_, p);
}

}  // namespace
}  // namespace weft::cuda
