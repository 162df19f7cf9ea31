#include "src/cuda/device_world.h"

#include <algorithm>
#include <cstring>

#include "src/common/log.h"

namespace weft::cuda {
namespace {

using cuda::CuDevicePtr;
using cuda::CuResult;

// FIFO memory starts on this boundary (device_fifo.h wants kFifoLine).
constexpr size_t kAllocAlign = 256;
// A rank's status slot: a DeviceStatus on a line of its own.
constexpr size_t kStatusSlotBytes = 128;
static_assert(sizeof(cuda::DeviceStatus) <= kStatusSlotBytes, "status slot");

// The worlds of this process by communicator: ranks of one communicator find each other here.
struct Registry {
  std::mutex mu;
  std::map<std::pair<uint64_t, std::string>, std::weak_ptr<DeviceWorld>> worlds;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: worlds may outlive static destructors
  return *r;
}

}  // namespace

ContextScope::ContextScope(const cuda::DriverApi& api, cuda::CuContext ctx) : api_(api) {
  if (!ctx || !api.ctxGetCurrent || !api.ctxSetCurrent) return;
  if (api.ctxGetCurrent(&previous_) != cuda::kCuSuccess || previous_ == ctx) return;
  switched_ = api.ctxSetCurrent(ctx) == cuda::kCuSuccess;
}

ContextScope::~ContextScope() {
  if (switched_) api_.ctxSetCurrent(previous_);
}

DeviceWorld::DeviceWorld(const cuda::DriverApi& api, int device, const Config& config)
    : api_(&api),
      device_(device),
      slots_(config.slots),
      slotBytes_(config.slotBytes),
      config_(config) {}

void DeviceWorld::check(CuResult rc, const char* what) const {
  if (rc != cuda::kCuSuccess)
    fail(Status::kUnhandledCudaError, std::string(what) + " failed: " + cuda::resultText(api_, rc) +
                                          " (setting up calls on device memory)");
}

std::shared_ptr<DeviceWorld> DeviceWorld::join(const cuda::DriverApi& api, uint64_t commHash,
                                               const std::string& busId, int device,
                                               const Config& config, std::string* why) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto w = r.worlds[{commHash, busId}].lock()) return w;
  std::shared_ptr<DeviceWorld> w(new DeviceWorld(api, device, config));
  if (api.primaryCtxRetain && api.primaryCtxRetain(&w->ctx_, device) == cuda::kCuSuccess)
    w->retained_ = true;
  else if (!api.ctxGetCurrent || api.ctxGetCurrent(&w->ctx_) != cuda::kCuSuccess)
    w->ctx_ = nullptr;
  const ContextScope scope(api, w->ctx_);
  w->module_ = cuda::InterpModule::load(api, why);
  if (!w->module_) return nullptr;
  w->check(api.streamCreate(&w->setup_, cuda::kCuStreamNonBlocking), "cuStreamCreate");
  // One abort word for every GPU of the communicator in this process (portable pinned memory:
  // every context reaches it), so that a failing lane stops the ranks on the other GPUs too.
  for (auto& [key, weak] : r.worlds)
    if (key.first == commHash)
      if (auto other = weak.lock()) {
        w->abortOwner_ = other->abortOwner_ ? other->abortOwner_ : other;
        w->abort_ = other->abort_;
        break;
      }
  if (!w->abortOwner_) w->abort_ = w->hostBlock(sizeof(uint64_t));
  // Everything later calls need, now, before any launch of this world can wait for a peer.
  w->statuses_ = w->hostBlock(cuda::kMaxLaunchRanks * kStatusSlotBytes);
  w->check(api.memHostAlloc(&w->staging_, config.stagingBytes, cuda::kCuMemHostAllocPortable),
           "cuMemHostAlloc");
  w->stagingBytes_ = config.stagingBytes;
  {
    std::lock_guard<std::mutex> own(w->mu_);
    w->grow(config.arenaBytes);
  }
  r.worlds[{commHash, busId}] = w;
  return w;
}

DeviceWorld::~DeviceWorld() {
  if (keepMemory_) {
    WEFT_WARN(INIT,
              "calls on device memory: a launch did not end in time; its memory stays allocated");
    return;
  }
  {
    const ContextScope scope(*api_, ctx_);
    if (importer_) importer_->close();
    for (CuDevicePtr p : allocations_) api_->memFree(p);
    for (void* h : hostBlocks_) api_->memFreeHost(h);
    if (staging_) api_->memFreeHost(staging_);
    if (setup_) api_->streamDestroy(setup_);
    module_.reset();
  }
  if (retained_ && api_->primaryCtxRelease) api_->primaryCtxRelease(device_);
}

void DeviceWorld::reach(const DeviceWorld& peer) {
  if (peer.ctx_ == ctx_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(reached_.begin(), reached_.end(), peer.ctx_) != reached_.end()) return;
  if (!api_->ctxEnablePeerAccess)
    fail(Status::kUnhandledCudaError, "the CUDA driver lacks cuCtxEnablePeerAccess");
  const ContextScope scope(*api_, ctx_);
  const CuResult rc = api_->ctxEnablePeerAccess(peer.ctx_, 0);
  if (rc != cuda::kCuErrorPeerAccessAlreadyEnabled) check(rc, "cuCtxEnablePeerAccess");
  reached_.push_back(peer.ctx_);
}

void DeviceWorld::copyIn(CuDevicePtr dst, const void* host, size_t bytes) {
  for (size_t done = 0; done < bytes;) {
    const size_t piece = std::min(stagingBytes_, bytes - done);
    if (host)
      std::memcpy(staging_, static_cast<const char*>(host) + done, piece);
    else
      std::memset(staging_, 0, piece);
    check(api_->memcpyHtoDAsync(dst + done, staging_, piece, setup_), "cuMemcpyHtoDAsync");
    check(api_->streamSynchronize(setup_), "cuStreamSynchronize");
    done += piece;
  }
}

void DeviceWorld::grow(size_t bytes) {
  const ContextScope scope(*api_, ctx_);
  CuDevicePtr p = 0;
  bytes = std::max<size_t>(bytes, config_.arenaBytes);
  check(api_->memAlloc(&p, bytes), "cuMemAlloc");
  allocations_.push_back(p);
  arenaNext_ = p;
  arenaLeft_ = bytes;
}

bool DeviceWorld::quiescentLocked() {
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const std::shared_ptr<LaunchDone>& d) { return d->finished(); }),
                 running_.end());
  return running_.empty() && !config_.sharedWithOtherProcesses;
}

void DeviceWorld::launched(const std::shared_ptr<LaunchDone>& done) {
  std::lock_guard<std::mutex> lock(mu_);
  quiescentLocked();
  if (done) running_.push_back(done);
}

std::vector<std::shared_ptr<LaunchDone>> DeviceWorld::running() {
  std::lock_guard<std::mutex> lock(mu_);
  quiescentLocked();
  return running_;
}

size_t DeviceWorld::allocations() {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_.size();
}

CuDevicePtr DeviceWorld::allocate(size_t bytes, bool zero) {
  std::lock_guard<std::mutex> lock(mu_);
  const ContextScope scope(*api_, ctx_);
  bytes = std::max<size_t>(kAllocAlign, (bytes + kAllocAlign - 1) / kAllocAlign * kAllocAlign);
  if (bytes > arenaLeft_) {
    if (!quiescentLocked())
      fail(Status::kInvalidUsage,
           "calls on device memory need " + std::to_string(bytes) +
               " more bytes of device memory than WEFT_DEVICE_ARENA_BYTES (" +
               std::to_string(config_.arenaBytes) +
               ") reserved, while kernels of this communicator may be waiting for peers (or ranks "
               "in other processes share the GPU): allocating now would synchronise the GPU under "
               "them; raise WEFT_DEVICE_ARENA_BYTES");
    grow(bytes);
  }
  const CuDevicePtr p = arenaNext_;
  arenaNext_ += bytes;
  arenaLeft_ -= bytes;
  if (zero) copyIn(p, nullptr, bytes);
  return p;
}

CuDevicePtr DeviceWorld::upload(const void* host, size_t bytes) {
  CuDevicePtr p = allocate(bytes, false);
  std::lock_guard<std::mutex> lock(mu_);
  const ContextScope scope(*api_, ctx_);
  copyIn(p, host, bytes);
  return p;
}

DeviceWorld::HostBlock DeviceWorld::statusOf(int rank) const {
  HostBlock b;
  b.host = static_cast<char*>(statuses_.host) + static_cast<size_t>(rank) * kStatusSlotBytes;
  b.device = statuses_.device + static_cast<size_t>(rank) * kStatusSlotBytes;
  return b;
}

DeviceWorld::HostBlock DeviceWorld::hostBlock(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const ContextScope scope(*api_, ctx_);
  bytes = (bytes + 63) / 64 * 64;
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
  const ContextScope scope(*api_, ctx_);
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
  const ContextScope scope(*api_, ctx_);
  if (Status st = importer_->map(d, &mem, &why); st != Status::kSuccess)
    fail(st, "mapping the FIFO of rank " + std::to_string(to) + ": " + why);
  const cuda::DeviceFifo f = cuda::fifoAt(mem, slots_, slotBytes_);
  fifos_.emplace(std::make_tuple(from, to, channel), f);
  return f;
}

void DeviceWorld::raiseAbortOf(uint64_t commHash) {
  std::vector<std::shared_ptr<DeviceWorld>> worlds;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& [key, weak] : r.worlds)
      if (key.first == commHash)
        if (auto w = weak.lock()) worlds.push_back(std::move(w));
  }
  for (auto& w : worlds) w->raiseAbort();
}

void DeviceWorld::raiseAbort() { __atomic_store_n(abortHost(), 1u, __ATOMIC_RELEASE); }

}  // namespace weft::cuda
