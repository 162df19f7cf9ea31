#include "src/core/device_world.h"

#include <algorithm>
#include <cstring>

#include "src/common/log.h"

namespace weft::core {
namespace {

using cuda::CuDevicePtr;
using cuda::CuResult;

// FIFO memory starts on this boundary (device_fifo.h wants kFifoLine).
constexpr size_t kAllocAlign = 256;

// The worlds of this process by communicator: ranks of one communicator find each other here.
struct Registry {
  std::mutex mu;
  std::map<uint64_t, std::weak_ptr<DeviceWorld>> worlds;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: worlds may outlive static destructors
  return *r;
}

}  // namespace

DeviceWorld::DeviceWorld(const cuda::DriverApi& api, int device, uint32_t slots, uint32_t slotBytes)
    : api_(&api), device_(device), slots_(slots), slotBytes_(slotBytes) {}

void DeviceWorld::check(CuResult rc, const char* what) const {
  if (rc != cuda::kCuSuccess)
    fail(Status::kUnhandledCudaError, std::string(what) + " failed: " + cuda::resultText(api_, rc) +
                                          " (setting up calls on device memory)");
}

std::shared_ptr<DeviceWorld> DeviceWorld::join(const cuda::DriverApi& api, uint64_t commHash,
                                               int device, uint32_t slots, uint32_t slotBytes,
                                               std::string* why) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto w = r.worlds[commHash].lock()) return w;
  std::unique_ptr<cuda::InterpModule> module = cuda::InterpModule::load(api, why);
  if (!module) return nullptr;
  std::shared_ptr<DeviceWorld> w(new DeviceWorld(api, device, slots, slotBytes));
  w->module_ = std::move(module);
  w->check(api.streamCreate(&w->setup_, cuda::kCuStreamNonBlocking), "cuStreamCreate");
  w->abort_ = w->hostBlock(sizeof(uint64_t));
  r.worlds[commHash] = w;
  return w;
}

DeviceWorld::~DeviceWorld() {
  if (keepMemory_) {
    WEFT_WARN(INIT,
              "calls on device memory: a launch did not end in time; its memory stays allocated");
    return;
  }
  if (importer_) importer_->close();
  for (CuDevicePtr p : allocations_) api_->memFree(p);
  for (void* h : hostBlocks_) api_->memFreeHost(h);
  if (staging_) api_->memFreeHost(staging_);
  if (setup_) api_->streamDestroy(setup_);
}

void DeviceWorld::copyIn(CuDevicePtr dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  if (stagingBytes_ < bytes) {
    if (staging_) api_->memFreeHost(staging_);
    staging_ = nullptr;
    stagingBytes_ = 0;
    const size_t want = std::max<size_t>(bytes, 64 << 10);
    check(api_->memHostAlloc(&staging_, want, cuda::kCuMemHostAllocPortable), "cuMemHostAlloc");
    stagingBytes_ = want;
  }
  if (host)
    std::memcpy(staging_, host, bytes);
  else
    std::memset(staging_, 0, bytes);
  check(api_->memcpyHtoDAsync(dst, staging_, bytes, setup_), "cuMemcpyHtoDAsync");
  check(api_->streamSynchronize(setup_), "cuStreamSynchronize");
}

CuDevicePtr DeviceWorld::allocate(size_t bytes, bool zero) {
  std::lock_guard<std::mutex> lock(mu_);
  CuDevicePtr p = 0;
  bytes = std::max<size_t>(kAllocAlign, (bytes + kAllocAlign - 1) / kAllocAlign * kAllocAlign);
  check(api_->memAlloc(&p, bytes), "cuMemAlloc");
  allocations_.push_back(p);
  if (zero) copyIn(p, nullptr, bytes);
  return p;
}

CuDevicePtr DeviceWorld::upload(const void* host, size_t bytes) {
  CuDevicePtr p = allocate(bytes, false);
  std::lock_guard<std::mutex> lock(mu_);
  copyIn(p, host, bytes);
  return p;
}

DeviceWorld::HostBlock DeviceWorld::hostBlock(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  HostBlock b;
  check(api_->memHostAlloc(&b.host, bytes,
                           cuda::kCuMemHostAllocPortable | cuda::kCuMemHostAllocDeviceMap),
        "cuMemHostAlloc");
  hostBlocks_.push_back(b.host);
  std::memset(b.host, 0, bytes);
  check(api_->memHostGetDevicePointer(&b.device, b.host, 0), "cuMemHostGetDevicePointer");
  return b;
}

cuda::DeviceFifo DeviceWorld::fifo(int from, int to, int channel) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fifos_.find({from, to, channel});
    if (it != fifos_.end()) return it->second;
  }
  // Only the counters and sizes need zeros; the slots are written before they are read.
  const size_t bytes = cuda::fifoBytes(slots_, slotBytes_);
  CuDevicePtr mem = allocate(bytes, false);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = fifos_.find({from, to, channel});
  if (it != fifos_.end()) return it->second;  // another rank made it meanwhile
  copyIn(mem, nullptr, 2 * cuda::kFifoLine + cuda::fifoSizesBytes(slots_));
  const cuda::DeviceFifo f =
      cuda::fifoAt(reinterpret_cast<void*>(static_cast<uintptr_t>(mem)), slots_, slotBytes_);
  fifos_.emplace(std::make_tuple(from, to, channel), f);
  return f;
}

bool DeviceWorld::findFifo(int from, int to, int channel, cuda::DeviceFifo* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = fifos_.find({from, to, channel});
  if (it == fifos_.end()) return false;
  *out = it->second;
  return true;
}

cuda::DeviceFifo DeviceWorld::importFifo(int from, int to, int channel,
                                         const transport::cuda::IpcDescriptor& d) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = fifos_.find({from, to, channel});
  if (it != fifos_.end()) return it->second;
  if (d.length < fifoBytes())
    fail(Status::kRemoteError, "rank " + std::to_string(to) + " offered a FIFO of " +
                                   std::to_string(d.length) + " bytes, not " +
                                   std::to_string(fifoBytes()));
  if (!importer_)
    importer_ = std::make_unique<transport::cuda::IpcImporter>(
        *api_, device_, transport::cuda::IpcImporter::Options{});
  void* mem = nullptr;
  std::string why;
  if (Status st = importer_->map(d, &mem, &why); st != Status::kSuccess)
    fail(st, "mapping the FIFO of rank " + std::to_string(to) + ": " + why);
  const cuda::DeviceFifo f = cuda::fifoAt(mem, slots_, slotBytes_);
  fifos_.emplace(std::make_tuple(from, to, channel), f);
  return f;
}

void DeviceWorld::raiseAbortOf(uint64_t commHash) {
  std::shared_ptr<DeviceWorld> w;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.worlds.find(commHash);
    if (it != r.worlds.end()) w = it->second.lock();
  }
  if (w) w->raiseAbort();
}

void DeviceWorld::raiseAbort() { __atomic_store_n(abortHost(), 1u, __ATOMIC_RELEASE); }

}  // namespace weft::core
