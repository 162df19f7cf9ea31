// The cuMem allocation, export and import code against a fake driver whose "device memory" is
// memfd-backed host memory (fake_cuda_driver.h): granularity rounding, peer access, cleanup on
// failure, the cuMemAlloc fallback, the descriptors exports make, and importing them again
// (in this process and in a forked one) with the bytes checked through both mappings.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "tests/unit/cuda/fake_cuda_driver.h"
#include "transports/cuda/allocation.h"
#include "transports/cuda/ipc.h"

namespace weft::transport::cuda {
namespace {

namespace fake = weft::cuda::fake;
using weft::cuda::CuResult;

class CudaIpc : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::state().canAccess = {{1, 1, 0}, {1, 1, 0}, {0, 0, 1}};
    fake::state().devices = 3;
    api_ = fake::table();
  }
  weft::cuda::DriverApi api_;
};

TEST_F(CudaIpc, CurrentContextDecidesTheDevice) {
  int device = -1;
  fake::state().currentDevice = 1;
  EXPECT_TRUE(currentContextDevice(&api_, &device));
  EXPECT_EQ(device, 1);
  fake::state().contextCurrent = false;
  EXPECT_FALSE(currentContextDevice(&api_, &device));
  EXPECT_FALSE(currentContextDevice(nullptr, &device));
  weft::cuda::DriverApi old = api_;
  old.ctxGetCurrent = nullptr;  // a driver without the entry point: host path
  fake::state().contextCurrent = true;
  EXPECT_FALSE(currentContextDevice(&old, &device));
}

TEST_F(CudaIpc, CuMemAllocationIsRoundedSharedAndAccessibleToPeers) {
  DeviceAllocation a;
  std::string why;
  ASSERT_EQ(Status::kSuccess, createDeviceAllocation(api_, 0, 100000, &a, &why)) << why;
  EXPECT_TRUE(a.cuMem);
  EXPECT_EQ(a.requested, 100000u);
  EXPECT_EQ(a.bytes, 2u * fake::state().granularity);
  EXPECT_GE(a.fd, 0);
  EXPECT_NE(a.secret, 0u);
  EXPECT_EQ(fake::state().lastProp.requestedHandleTypes, weft::cuda::kCuMemHandleTypePosixFd);
  EXPECT_EQ(fake::state().lastProp.location.id, 0);
  // GPU 0 and GPU 1 (which can access GPU 0), not GPU 2.
  ASSERT_EQ(fake::state().lastAccess.size(), 2u);
  EXPECT_EQ(fake::state().lastAccess[0].location.id, 0);
  EXPECT_EQ(fake::state().lastAccess[1].location.id, 1);
  EXPECT_EQ(fake::state().lastAccess[1].flags, weft::cuda::kCuMemAccessProtReadWrite);
  std::memset(a.base, 7, a.bytes);  // mapped read-write
  destroyDeviceAllocation(api_, a);
  EXPECT_TRUE(fake::state().handles.empty());
  EXPECT_TRUE(fake::state().reserved.empty());
}

TEST_F(CudaIpc, FailedStepsUndoTheirPredecessors) {
  DeviceAllocation a;
  std::string why;
  fake::state().failSetAccess = weft::cuda::kCuErrorInvalidDevice;
  EXPECT_EQ(Status::kUnhandledCudaError, createDeviceAllocation(api_, 0, 4096, &a, &why));
  EXPECT_NE(why.find("cuMemSetAccess"), std::string::npos) << why;
  EXPECT_TRUE(fake::state().handles.empty());
  EXPECT_TRUE(fake::state().reserved.empty());
  EXPECT_TRUE(fake::state().mapped.empty());
  fake::state().failSetAccess = weft::cuda::kCuSuccess;
  fake::state().failCreate = weft::cuda::kCuErrorOutOfMemory;
  EXPECT_EQ(Status::kSystemError, createDeviceAllocation(api_, 0, 4096, &a, &why));
  EXPECT_NE(why.find("cuMemCreate"), std::string::npos) << why;
}

TEST_F(CudaIpc, WithoutVmmItFallsBackToCuMemAllocAndLegacyIpc) {
  fake::state().vmm = false;
  void* p = allocateDeviceMemory(api_, 0, 5000);
  DeviceAllocation a;
  ASSERT_TRUE(findDeviceAllocation(static_cast<char*>(p) + 4999, &a));
  EXPECT_FALSE(a.cuMem);
  EXPECT_EQ(a.fd, -1);
  IpcDescriptor d;
  std::string why;
  ASSERT_EQ(Status::kSuccess, exportDeviceBuffer(api_, static_cast<char*>(p) + 8, 100, &d, &why))
      << why;
  EXPECT_EQ(d.kind, static_cast<uint16_t>(IpcKind::kLegacy));
  EXPECT_EQ(d.offset, 8u);
  EXPECT_EQ(d.allocationBytes, 5000u);
  IpcDescriptor parsed;
  ASSERT_TRUE(parseIpcDescriptor(encodeIpcDescriptor(d), &parsed, &why)) << why;
  IpcImporter importer(api_, 0, {});
  void* mapped = nullptr;
  ASSERT_EQ(Status::kSuccess, importer.map(parsed, &mapped, &why)) << why;
  EXPECT_EQ(mapped, static_cast<char*>(p) + 8);  // the fake opens the same memory
  importer.close();
  EXPECT_EQ(fake::state().ipcCloses, 1);
  EXPECT_TRUE(freeDeviceMemory(api_, p));
  EXPECT_FALSE(freeDeviceMemory(api_, p));
}

TEST_F(CudaIpc, ExportRefusesRangesOutsideTheAllocation) {
  void* p = allocateDeviceMemory(api_, 0, 4096);
  DeviceAllocation a;
  ASSERT_TRUE(findDeviceAllocation(p, &a));
  IpcDescriptor d;
  std::string why;
  EXPECT_EQ(Status::kInvalidArgument,
            exportDeviceBuffer(api_, static_cast<char*>(p) + 16, a.bytes, &d, &why));
  EXPECT_NE(why.find("leaves its allocation"), std::string::npos) << why;
  int hostByte = 0;
  EXPECT_EQ(Status::kInvalidArgument, exportDeviceBuffer(api_, &hostByte, 4, &d, &why));
  EXPECT_NE(why.find("not device memory"), std::string::npos) << why;
  EXPECT_TRUE(freeDeviceMemory(api_, p));
}

TEST_F(CudaIpc, ImportInThisProcessSharesBytesAndMapsEachAllocationOnce) {
  auto* p = static_cast<unsigned char*>(allocateDeviceMemory(api_, 0, 3 * 4096));
  IpcDescriptor whole, tail;
  std::string why;
  DeviceAllocation a;
  ASSERT_TRUE(findDeviceAllocation(p, &a));
  ASSERT_EQ(Status::kSuccess, exportDeviceBuffer(api_, p, a.bytes, &whole, &why)) << why;
  ASSERT_EQ(Status::kSuccess, exportDeviceBuffer(api_, p + 4096, 4096, &tail, &why)) << why;
  EXPECT_EQ(whole.kind, static_cast<uint16_t>(IpcKind::kCuMemFd));
  EXPECT_EQ(whole.allocationId, tail.allocationId);
  EXPECT_NE(whole.socketNonce, 0u);
  for (FdRoute route : {FdRoute::kAny, FdRoute::kSocketOnly}) {
    IpcImporter importer(api_, 1, {std::chrono::seconds(10), route});
    void* w = nullptr;
    void* t = nullptr;
    ASSERT_EQ(Status::kSuccess, importer.map(whole, &w, &why)) << why;
    ASSERT_EQ(Status::kSuccess, importer.map(tail, &t, &why)) << why;
    EXPECT_EQ(importer.mappedAllocations(), 1u);
    EXPECT_EQ(static_cast<char*>(t) - static_cast<char*>(w), 4096);
    EXPECT_NE(w, static_cast<void*>(p));  // a second mapping of the same memory
    EXPECT_EQ(fake::state().lastAccess.back().location.id, 1);  // the importer's GPU
    p[4096] = 0x11;
    EXPECT_EQ(static_cast<unsigned char*>(t)[0], 0x11);
    static_cast<unsigned char*>(w)[5] = 0x22;
    EXPECT_EQ(p[5], 0x22);
    if (route == FdRoute::kSocketOnly) {
      EXPECT_EQ(importer.fdsFromSocket(), 1u);
    }
    // Same allocation, other size: refused rather than mapped twice.
    IpcDescriptor liar = whole;
    liar.allocationBytes += 4096;
    liar.length = 4096;
    EXPECT_EQ(Status::kInvalidArgument, importer.map(liar, &w, &why));
    const int unmapsBefore = fake::state().unmaps;
    importer.close();
    importer.close();
    EXPECT_EQ(fake::state().unmaps, unmapsBefore + 1);
    EXPECT_EQ(importer.mappedAllocations(), 0u);
  }
  EXPECT_TRUE(freeDeviceMemory(api_, p));
  EXPECT_EQ(deviceAllocationCount(), 0u);
}

TEST_F(CudaIpc, ImportRefusesMalformedDescriptors) {
  IpcImporter importer(api_, 0, {});
  IpcDescriptor d;  // kind 0
  void* p = nullptr;
  std::string why;
  EXPECT_EQ(Status::kInvalidArgument, importer.map(d, &p, &why));
  EXPECT_NE(why.find("refused"), std::string::npos) << why;
}

// The owner exports; a forked child (the fake's state copied with it, as a second process
// running the same driver would have its own) imports through the fd route, checks the owner's
// bytes, writes its own, and the owner checks those.
TEST_F(CudaIpc, ForkedPeerMapsTheAllocationAndDataFlowsBothWays) {
  auto* p = static_cast<unsigned char*>(allocateDeviceMemory(api_, 0, 8192));
  for (int i = 0; i < 8192; ++i) p[i] = static_cast<unsigned char>(i * 7);
  IpcDescriptor d;
  std::string why;
  ASSERT_EQ(Status::kSuccess, exportDeviceBuffer(api_, p, 8192, &d, &why)) << why;
  const IpcDescriptorBytes wire = encodeIpcDescriptor(d);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    IpcDescriptor got;
    std::string w;
    if (!parseIpcDescriptor(wire, &got, &w)) _exit(2);
    IpcImporter importer(api_, 1, {std::chrono::seconds(10), FdRoute::kSocketOnly});
    void* m = nullptr;
    // The fork copied the owner's mapping; the child's own import must be a new one.
    if (importer.map(got, &m, &w) != Status::kSuccess || m == p) _exit(3);
    auto* q = static_cast<unsigned char*>(m);
    for (int i = 0; i < 8192; ++i)
      if (q[i] != static_cast<unsigned char>(i * 7)) _exit(4);
    for (int i = 0; i < 8192; ++i) q[i] = static_cast<unsigned char>(255 - i % 251);
    importer.close();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(child, waitpid(child, &status, 0));
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(0, WEXITSTATUS(status)) << "child failed at step " << WEXITSTATUS(status);
  for (int i = 0; i < 8192; ++i)
    ASSERT_EQ(p[i], static_cast<unsigned char>(255 - i % 251)) << "byte " << i;
  EXPECT_TRUE(freeDeviceMemory(api_, p));
}

}  // namespace
}  // namespace weft::transport::cuda
