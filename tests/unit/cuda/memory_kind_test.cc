// The per-call route (host path, CUDA path, or a refusal) from buffers and stream, against a fake
// driver whose pointer table the tests fill; and the real loader against libraries that are not
// a working driver (absent, or the toolkit's stub libcuda.so).
#include "src/cuda/memory_kind.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

namespace weft::cuda {
namespace {

struct FakeAllocation {
  unsigned memoryType;
  int device;
  bool managed;
};

// The fake driver's state. Function pointers cannot capture, so the fake reads globals; each
// test resets them in SetUp.
std::map<uintptr_t, FakeAllocation> gAllocations;
CuResult gDeviceCountResult = kCuSuccess;
int gDeviceCount = 1;

CuResult fakeDriverGetVersion(int* v) {
  *v = 13000;
  return kCuSuccess;
}

CuResult fakeDeviceGetCount(int* count) {
  *count = gDeviceCountResult == kCuSuccess ? gDeviceCount : 0;
  return gDeviceCountResult;
}

CuResult fakePointerGetAttribute(void* data, int attribute, unsigned long long ptr) {
  if (gDeviceCountResult == kCuErrorNotInitialized) return kCuErrorNotInitialized;
  auto it = gAllocations.find(static_cast<uintptr_t>(ptr));
  if (it == gAllocations.end()) return kCuErrorInvalidValue;
  switch (attribute) {
    case kCuPointerAttributeMemoryType:
      *static_cast<unsigned*>(data) = it->second.memoryType;
      return kCuSuccess;
    case kCuPointerAttributeDeviceOrdinal:
      *static_cast<int*>(data) = it->second.device;
      return kCuSuccess;
    case kCuPointerAttributeIsManaged:
      *static_cast<unsigned*>(data) = it->second.managed ? 1 : 0;
      return kCuSuccess;
    default:
      return kCuErrorInvalidValue;
  }
}

class RouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gAllocations.clear();
    gDeviceCountResult = kCuSuccess;
    gDeviceCount = 2;
    fake_.api = std::make_unique<DriverApi>();
    fake_.api->driverGetVersion = fakeDriverGetVersion;
    fake_.api->deviceGetCount = fakeDeviceGetCount;
    fake_.api->pointerGetAttribute = fakePointerGetAttribute;
    absent_.why = "libcuda.so.1 not loaded (test): no CUDA driver";
  }

  // Fake allocations at distinct made-up addresses (never dereferenced).
  const void* device(int gpu) { return add(kCuMemoryTypeDevice, gpu, false); }
  const void* managed(int gpu) { return add(kCuMemoryTypeDevice, gpu, true); }
  const void* pinnedHost() { return add(kCuMemoryTypeHost, -1, false); }
  const void* add(unsigned type, int gpu, bool isManaged) {
    const uintptr_t address = 0x7f0000000000ull + 0x1000 * (gAllocations.size() + 1);
    gAllocations[address] = {type, gpu, isManaged};
    return reinterpret_cast<const void*>(address);
  }

  Status route(const DriverLoad& driver, const void* send, const void* recv, const void* stream,
               bool hostStream) {
    const std::vector<CallBuffer> buffers{{"sendbuff", send}, {"recvbuff", recv}};
    why_.clear();
    return chooseRoute(driver, buffers, stream, hostStream, &route_, &why_);
  }

  DriverLoad fake_, absent_;
  Route route_;
  std::string why_;
  int host_[4] = {};
  const void* const cudaStream_ = reinterpret_cast<const void*>(0x5000);
  const void* const hostStream_ = reinterpret_cast<const void*>(0x6000);
};

TEST_F(RouteTest, NoDriverHostMemoryTakesTheHostPath) {
  EXPECT_EQ(route(absent_, &host_[0], &host_[2], nullptr, false), Status::kSuccess);
  EXPECT_EQ(route_.path, ExecPath::kHost);
  EXPECT_EQ(route(absent_, &host_[0], &host_[2], hostStream_, true), Status::kSuccess);
  EXPECT_EQ(route_.path, ExecPath::kHost);
}

TEST_F(RouteTest, NoDriverRefusesAForeignStream) {
  EXPECT_EQ(route(absent_, &host_[0], &host_[2], cudaStream_, false), Status::kInvalidArgument);
  EXPECT_EQ(why_.rfind("no CUDA device", 0), 0u) << why_;
  EXPECT_NE(why_.find("libcuda.so.1"), std::string::npos) << why_;
}

TEST_F(RouteTest, UninitializedDriverMeansHostMemoryAndNoStreams) {
  gDeviceCountResult = kCuErrorNotInitialized;
  EXPECT_EQ(route(fake_, &host_[0], &host_[2], nullptr, false), Status::kSuccess);
  EXPECT_EQ(route_.path, ExecPath::kHost);
  EXPECT_EQ(route(fake_, &host_[0], &host_[2], cudaStream_, false), Status::kInvalidArgument);
  EXPECT_EQ(why_.rfind("no CUDA device", 0), 0u) << why_;
  EXPECT_NE(why_.find("not initialized"), std::string::npos) << why_;
}

TEST_F(RouteTest, DriverWithoutGpusRefusesAStream) {
  gDeviceCount = 0;
  EXPECT_EQ(route(fake_, &host_[0], &host_[2], cudaStream_, false), Status::kInvalidArgument);
  EXPECT_EQ(why_.rfind("no CUDA device", 0), 0u) << why_;
  gDeviceCountResult = kCuErrorNoDevice;
  EXPECT_EQ(route(fake_, nullptr, nullptr, cudaStream_, false), Status::kInvalidArgument);
  EXPECT_EQ(why_.rfind("no CUDA device", 0), 0u) << why_;
}

TEST_F(RouteTest, DeviceMemoryTakesTheCudaPath) {
  const void* a = device(1);
  const void* b = device(1);
  EXPECT_EQ(route(fake_, a, b, cudaStream_, false), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kDevice);
  EXPECT_EQ(route_.device, 1);
  // NULL is the legacy default stream, as in NCCL.
  EXPECT_EQ(route(fake_, a, b, nullptr, false), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kDevice);
  // In place, or with one buffer unused on this rank.
  EXPECT_EQ(route(fake_, a, nullptr, cudaStream_, false), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kDevice);
}

TEST_F(RouteTest, PinnedHostMemoryIsHostMemory) {
  const void* pinned = pinnedHost();
  EXPECT_EQ(route(fake_, pinned, &host_[0], nullptr, false), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kHost);
}

TEST_F(RouteTest, MixedHostAndDeviceIsRefusedNamingBoth) {
  EXPECT_EQ(route(fake_, &host_[0], device(0), cudaStream_, false), Status::kInvalidArgument);
  EXPECT_NE(why_.find("recvbuff"), std::string::npos) << why_;
  EXPECT_NE(why_.find("sendbuff"), std::string::npos) << why_;
  EXPECT_NE(why_.find("device memory on GPU 0"), std::string::npos) << why_;
  EXPECT_EQ(route(fake_, device(0), &host_[0], nullptr, false), Status::kInvalidArgument);
}

TEST_F(RouteTest, TwoGpusInOneCallAreRefused) {
  EXPECT_EQ(route(fake_, device(0), device(1), cudaStream_, false), Status::kInvalidArgument);
  EXPECT_NE(why_.find("one GPU"), std::string::npos) << why_;
}

TEST_F(RouteTest, DeviceMemoryOnAHostStreamIsRefused) {
  EXPECT_EQ(route(fake_, device(0), device(0), hostStream_, true), Status::kInvalidArgument);
  EXPECT_NE(why_.find("host stream"), std::string::npos) << why_;
}

TEST_F(RouteTest, HostMemoryOnACudaStreamIsRefused) {
  EXPECT_EQ(route(fake_, &host_[0], &host_[1], cudaStream_, false), Status::kInvalidArgument);
  EXPECT_NE(why_.find("host memory with a CUDA stream"), std::string::npos) << why_;
}

TEST_F(RouteTest, ManagedMemoryFollowsTheStream) {
  const void* a = managed(0);
  const void* b = managed(0);
  EXPECT_EQ(route(fake_, a, b, cudaStream_, false), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kDevice);
  EXPECT_EQ(route(fake_, a, b, nullptr, false), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kHost);
  EXPECT_EQ(route(fake_, a, b, hostStream_, true), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kHost);
  // With device memory, managed memory goes to the device too.
  EXPECT_EQ(route(fake_, a, device(0), nullptr, false), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kDevice);
}

TEST_F(RouteTest, ZeroCountOnACudaStreamIsOrderedOnTheDevice) {
  EXPECT_EQ(route(fake_, nullptr, nullptr, cudaStream_, false), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kDevice);
  EXPECT_EQ(route(fake_, nullptr, nullptr, nullptr, false), Status::kSuccess) << why_;
  EXPECT_EQ(route_.path, ExecPath::kHost);
}

TEST(DriverLoadTest, MissingLibraryLeavesNoApiAndSaysWhy) {
  const DriverLoad load = loadDriver("libweft-no-such-driver.so.1");
  EXPECT_EQ(load.api, nullptr);
  EXPECT_NE(load.why.find("libweft-no-such-driver.so.1"), std::string::npos) << load.why;
  EXPECT_NE(load.why.find("no CUDA driver"), std::string::npos) << load.why;
}

TEST(DriverLoadTest, LibraryWithoutTheEntryPointsIsNotADriver) {
  const DriverLoad load = loadDriver("libm.so.6");
  EXPECT_EQ(load.api, nullptr);
  EXPECT_NE(load.why.find("lacks cuDriverGetVersion"), std::string::npos) << load.why;
}

// The toolkit's stub libcuda.so has every entry point and fails every call: what a machine with
// a toolkit but no driver may load. Every pointer must be host memory, and a stream refused.
TEST(DriverLoadTest, StubDriverRoutesHostMemoryAndRefusesStreams) {
#if defined(WEFT_CUDA_STUB_DRIVER)
  const DriverLoad stub = loadDriver(WEFT_CUDA_STUB_DRIVER);
  ASSERT_NE(stub.api, nullptr) << stub.why;
  int host[2] = {};
  EXPECT_EQ(classifyPointer(stub.api.get(), &host[0]).kind, MemoryKind::kHost);
  const std::vector<CallBuffer> buffers{{"sendbuff", &host[0]}, {"recvbuff", &host[1]}};
  Route route;
  std::string why;
  EXPECT_EQ(chooseRoute(stub, buffers, nullptr, false, &route, &why), Status::kSuccess) << why;
  EXPECT_EQ(route.path, ExecPath::kHost);
  EXPECT_EQ(chooseRoute(stub, buffers, reinterpret_cast<const void*>(0x5000), false, &route, &why),
            Status::kInvalidArgument);
  EXPECT_EQ(why.rfind("no CUDA device", 0), 0u) << why;
#else
  GTEST_SKIP() << "no stub libcuda.so in this CUDA toolkit (or no toolkit)";
#endif
}

// The process's own driver: absent here means a reason; present means a table with entries.
TEST(DriverLoadTest, ProcessDriverIsLoadedOrExplained) {
  const DriverLoad& load = driver();
  if (load.api) {
    EXPECT_NE(load.api->pointerGetAttribute, nullptr);
  } else {
    EXPECT_FALSE(load.why.empty());
  }
  EXPECT_EQ(&driver(), &load);
}

}  // namespace
}  // namespace weft::cuda
