#include "src/cuda/device_kernels.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "src/bootstrap/bootstrap.h"
#include "src/common/log.h"
#include "src/cuda/device_plan.h"
#include "src/cuda/device_world.h"
#include "transports/cuda/ipc.h"
#include "transports/cuda/ipc_descriptor.h"

namespace weft::cuda {

using cuda::CuDevicePtr;
using cuda::CuResult;
using cuda::CuStream;

namespace {

// Bootstrap tags of FIFO exports, one per channel (the pair is the bootstrap's own).
constexpr int kFifoTagBase = 0x57460000;
int fifoTag(int channel) { return kFifoTagBase + channel; }

// Lane counters are allocated for at least this many lanes (plans have a few to a few dozen).
constexpr uint32_t kMinCounterLanes = 64;
// After an abort at destroy, how long a launch gets to notice it and end.
constexpr auto kAbortGrace = std::chrono::seconds(10);

template <class T>
T* deviceAs(CuDevicePtr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

// What a communicator's world on one GPU reserves at join (src/cuda/device_world.h).
DeviceWorld::Config worldConfig(CommView& comm) {
  const Tuning& t = comm.tuning();
  DeviceWorld::Config c;
  c.slots = t.slots;
  c.slotBytes = static_cast<uint32_t>(t.slotBytes);
  c.arenaBytes = t.deviceArenaBytes;
  c.stagingBytes = t.deviceStagingBytes;
  for (int r = 0; r < comm.size(); ++r)
    if (!comm.peerInThisProcess(r)) c.sharedWithOtherProcesses = true;
  return c;
}

std::string describeStatus(const cuda::DeviceStatus& s) {
  static const char* const kErrors[] = {"no error", "aborted", "timed out", "mismatched calls",
                                        "bad arguments"};
  static const char* const kWaits[] = {"nothing", "a step of lane", "a free slot to rank",
                                       "a message from rank"};
  std::string text =
      std::string("device interpreter: ") + (s.error < 5 ? kErrors[s.error] : "unknown error");
  if (s.error == static_cast<uint32_t>(cuda::DeviceError::kAborted))
    return text + " (this communicator, or another rank of it on this GPU, failed or was aborted)";
  text += " in lane " + std::to_string(s.lane) + " step " + std::to_string(s.step);
  if (s.waitingOn > 0 && s.waitingOn < 4)
    text += ", waiting for " + std::string(kWaits[s.waitingOn]) + " " + std::to_string(s.peer);
  if (s.error == static_cast<uint32_t>(cuda::DeviceError::kMismatch))
    text += ": expected " + std::to_string(s.expectedBytes) + " bytes, got " +
            std::to_string(s.gotBytes);
  return text;
}

}  // namespace

struct DeviceKernelRank::Impl {
  const cuda::DriverApi* api = nullptr;
  CommView* comm = nullptr;
  int rank = 0;
  std::vector<std::string> busIds;  // every rank's GPU at init
  uint32_t slotBytes = 0;
  uint64_t timeoutNs = 0;
  std::chrono::milliseconds timeout{0};

  // A lowered plan in device memory: the blob, then its send and receive FIFO tables.
  struct Blob {
    std::shared_ptr<const plan::Plan> keep;
    std::vector<int> peers;  // of its links
    CuDevicePtr mem = 0;
    uint32_t lanes = 0;
    size_t sendAt = 0, recvAt = 0;
  };
  std::map<DeviceKernelRank::BlobKey, Blob> blobs;

  // laneDone[counterLanes], lanesFinished, runs: the launches keep their epochs in device
  // memory, so a captured launch replays as the next run.
  CuDevicePtr counters = 0;
  uint32_t counterLanes = 0;
  CuDevicePtr scratch = 0;
  size_t scratchBytes = 0;
  DeviceWorld::HostBlock status;

  std::vector<std::shared_ptr<LaunchDone>> pending;
  uint64_t collectives = 0;  // collective units committed

  // Encoded plans not yet in device memory (their links may still wait for an export), with
  // the plan their key names kept alive.
  struct Encoded {
    cuda::DevicePlanBlob blob;
    std::shared_ptr<const plan::Plan> keep;
  };
  std::map<DeviceKernelRank::BlobKey, Encoded> lowered;
  // Receive links from ranks in other processes whose FIFOs this rank has exported.
  std::map<std::pair<int, int>, bool> exported;
  // The worlds of other GPUs of this process whose FIFOs this rank sends on, by bus id.
  std::map<std::string, std::shared_ptr<DeviceWorld>> peerWorlds;

  // The unit's Work encoded for the device (once per key): the same lowered program the host
  // executor would run.
  const Encoded& lower(const DeviceKernelRank::Unit& u) {
    auto it = lowered.find(u.key);
    if (it != lowered.end()) return it->second;
    Encoded e{cuda::encodeForDevice(u.work, slotBytes), u.work.plan};
    return lowered.emplace(u.key, std::move(e)).first->second;
  }

  // Exports the FIFOs of `blob`'s receive links whose senders live in other processes.
  void exportReceives(DeviceWorld& world, const cuda::DevicePlanBlob& blob) {
    const cuda::DevicePlan* dp = blob.plan();
    for (uint32_t k = 0; k < dp->recvLinks; ++k) {
      const cuda::DeviceLink l = cuda::recvLinksOf(dp)[k];
      if (comm->peerInThisProcess(l.peer) || exported.count({l.peer, l.channel})) continue;
      const cuda::DeviceFifo f = world.fifo(l.peer, rank, l.channel);
      transport::cuda::IpcDescriptor d;
      std::string why;
      const ContextScope scope(*api, world.context());
      if (Status st =
              transport::cuda::exportDeviceBuffer(*api, f.posted, world.fifoBytes(), &d, &why);
          st != Status::kSuccess)
        fail(st, "exporting the FIFO from rank " + std::to_string(l.peer) + ": " + why);
      const auto bytes = transport::cuda::encodeIpcDescriptor(d);
      comm->bootstrap().send(l.peer, fifoTag(l.channel), bytes.data(), bytes.size());
      exported[{l.peer, l.channel}] = true;
    }
  }

  // The world of `peer`'s GPU in this process (joined here if the peer has not called yet).
  DeviceWorld& worldOf(DeviceWorld& mine, int peer) {
    const std::string& bus = busIds[peer];
    if (bus == busIds[rank]) return mine;
    auto it = peerWorlds.find(bus);
    if (it != peerWorlds.end()) return *it->second;
    cuda::CuDevice device = -1;
    if (CuResult rc = api->deviceGetByPciBusId(&device, bus.c_str()); rc != cuda::kCuSuccess)
      fail(Status::kUnhandledCudaError,
           "cuDeviceGetByPCIBusId(" + bus + ") failed: " + cuda::resultText(api, rc));
    std::string why;
    std::shared_ptr<DeviceWorld> w =
        DeviceWorld::join(*api, comm->commHash(), bus, device, worldConfig(*comm), &why);
    if (!w) fail(Status::kUnhandledCudaError, "GPU " + bus + ": " + why);
    mine.reach(*w);
    return *peerWorlds.emplace(bus, std::move(w)).first->second;
  }

  // The FIFO this rank sends on to `peer`: in its receiver's GPU memory, shared in this process
  // (through peer access from another GPU), else mapped from the receiver's export (waiting for
  // it through the bootstrap).
  cuda::DeviceFifo sendFifo(DeviceWorld& world, int peer, int channel) {
    cuda::DeviceFifo f;
    if (comm->peerInThisProcess(peer)) return worldOf(world, peer).fifo(rank, peer, channel);
    if (world.findFifo(rank, peer, channel, &f)) return f;
    transport::cuda::IpcDescriptorBytes bytes;
    comm->bootstrap().recv(peer, fifoTag(channel), bytes.data(), bytes.size());
    transport::cuda::IpcDescriptor d;
    std::string why;
    if (!transport::cuda::parseIpcDescriptor(bytes, &d, &why))
      fail(Status::kRemoteError,
           "rank " + std::to_string(peer) + " sent a bad FIFO export: " + why);
    return world.importFifo(rank, peer, channel, d);
  }

  const Blob& blobFor(DeviceWorld& world, const DeviceKernelRank::Unit& u) {
    auto it = blobs.find(u.key);
    if (it != blobs.end()) return it->second;
    const Encoded& encoded = lower(u);
    const cuda::DevicePlanBlob& blob = encoded.blob;
    const cuda::DevicePlan* dp = blob.plan();
    std::vector<cuda::DeviceFifo> sends, recvs;
    for (uint32_t k = 0; k < dp->sendLinks; ++k) {
      const cuda::DeviceLink l = cuda::sendLinksOf(dp)[k];
      sends.push_back(sendFifo(world, l.peer, l.channel));
    }
    for (uint32_t k = 0; k < dp->recvLinks; ++k) {
      const cuda::DeviceLink l = cuda::recvLinksOf(dp)[k];
      recvs.push_back(world.fifo(l.peer, rank, l.channel));
    }
    Blob b;
    b.keep = encoded.keep;
    for (uint32_t k = 0; k < dp->sendLinks; ++k) b.peers.push_back(cuda::sendLinksOf(dp)[k].peer);
    for (uint32_t k = 0; k < dp->recvLinks; ++k) b.peers.push_back(cuda::recvLinksOf(dp)[k].peer);
    b.lanes = dp->lanes;
    b.sendAt = (blob.bytes() + 63) / 64 * 64;
    b.recvAt = b.sendAt + sends.size() * sizeof(cuda::DeviceFifo);
    std::vector<char> bytes(b.recvAt + recvs.size() * sizeof(cuda::DeviceFifo));
    std::memcpy(bytes.data(), blob.data(), blob.bytes());
    if (!sends.empty())
      std::memcpy(bytes.data() + b.sendAt, sends.data(), sends.size() * sizeof(cuda::DeviceFifo));
    if (!recvs.empty())
      std::memcpy(bytes.data() + b.recvAt, recvs.data(), recvs.size() * sizeof(cuda::DeviceFifo));
    b.mem = world.upload(bytes.data(), bytes.size());
    lowered.erase(u.key);
    return blobs.emplace(u.key, std::move(b)).first->second;
  }

  // Drops the launches known to be finished; true when none is left.
  bool prune() {
    pending.erase(
        std::remove_if(pending.begin(), pending.end(),
                       [](const std::shared_ptr<LaunchDone>& d) { return d->finished(); }),
        pending.end());
    return pending.empty();
  }

  bool awaitPending(std::chrono::steady_clock::duration limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!prune()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
};

std::unique_ptr<DeviceKernelRank> DeviceKernelRank::make(const cuda::DriverApi& api, CommView& comm,
                                                         int device,
                                                         const std::vector<std::string>& busIds,
                                                         bool gpusReachEachOther,
                                                         std::string* why) {
  const Tuning& t = comm.tuning();
  if (!t.deviceKernels) {
    *why = "WEFT_DEVICE_KERNELS=0";
    return nullptr;
  }
  if (!comm.allRanksOnThisHost()) {
    *why = "its ranks are on several hosts";
    return nullptr;
  }
  if (std::any_of(busIds.begin(), busIds.end(), [](const std::string& b) { return b.empty(); })) {
    *why = "not every rank had a GPU current at init";
    return nullptr;
  }
  const bool oneGpu = std::all_of(busIds.begin(), busIds.end(),
                                  [&](const std::string& b) { return b == busIds[0]; });
  if (!oneGpu && !gpusReachEachOther) {
    *why = "its ranks' GPUs cannot all reach each other's memory (no peer access)";
    return nullptr;
  }
  if (comm.size() > static_cast<int>(cuda::kMaxLaunchRanks)) {
    *why = "it has more than " + std::to_string(cuda::kMaxLaunchRanks) + " ranks";
    return nullptr;
  }
  std::vector<cuda::DriverFeature> features{
      cuda::DriverFeature::kStreams, cuda::DriverFeature::kStaged, cuda::DriverFeature::kKernels};
  // FIFOs between processes travel as legacy IPC handles of cuMemAlloc memory.
  for (int r = 0; r < comm.size(); ++r)
    if (!comm.peerInThisProcess(r)) {
      features.push_back(cuda::DriverFeature::kLegacyIpc);
      break;
    }
  for (auto feature : features)
    if (std::string missing = cuda::missingEntryPoint(&api, feature); !missing.empty()) {
      *why = "the driver lacks " + missing;
      return nullptr;
    }
  if (!api.memAlloc || !api.memFree || !api.streamCreate || !api.streamDestroy ||
      !api.streamSynchronize || !api.streamWaitEvent) {
    *why = "the driver lacks cuMemAlloc, cuMemFree or stream entry points";
    return nullptr;
  }
  if (!oneGpu && (!api.deviceGetByPciBusId || !api.ctxEnablePeerAccess || !api.primaryCtxRetain ||
                  !api.ctxSetCurrent)) {
    *why = "the driver lacks the entry points of peer access between contexts";
    return nullptr;
  }
  std::shared_ptr<DeviceWorld> world =
      DeviceWorld::join(api, comm.commHash(), busIds[comm.rank()], device, worldConfig(comm), why);
  if (!world) return nullptr;
  std::unique_ptr<DeviceKernelRank> k(new DeviceKernelRank);
  k->api_ = &api;
  k->threads_ = t.deviceThreads;
  k->world_ = std::move(world);
  k->impl_ = std::make_unique<Impl>();
  Impl& m = *k->impl_;
  m.api = &api;
  m.comm = &comm;
  m.rank = comm.rank();
  m.busIds = busIds;
  m.slotBytes = static_cast<uint32_t>(t.slotBytes);
  m.timeout = t.timeout;
  m.timeoutNs = t.timeout.count() > 0 ? static_cast<uint64_t>(t.timeout.count()) * 1000000ull
                                      : ~uint64_t{0} / 2;
  m.status = k->world_->statusOf(comm.rank());
  std::string directWhy;
  k->direct_ = cuda::DirectRank::make(api, comm, k->world_, device, oneGpu, &directWhy);
  if (!k->direct_)
    WEFT_INFO(INIT, "rank %d: no direct kernels: %s", comm.rank(), directWhy.c_str());
  return k;
}

DeviceKernelRank::~DeviceKernelRank() {
  if (!impl_) return;
  Impl& m = *impl_;
  const auto limit = m.timeout.count() > 0 ? m.timeout : std::chrono::milliseconds(30000);
  if (m.awaitPending(limit)) return;
  WEFT_WARN(INIT, "rank %d: launches on device memory still run at destroy: aborting them", m.rank);
  world_->raiseAbort();
  if (!m.awaitPending(kAbortGrace)) world_->keepMemory();
}

uint64_t DeviceKernelRank::callNumber() const { return impl_->collectives; }

int DeviceKernelRank::rank() const { return impl_->rank; }

bool DeviceKernelRank::localPeer(int r) const {
  const Impl& m = *impl_;
  return m.busIds[r] == m.busIds[m.rank] && m.comm->peerInThisProcess(r);
}

size_t DeviceKernelRank::ranksHere() const {
  size_t n = 0;
  for (int r = 0; r < impl_->comm->size(); ++r) n += localPeer(r) ? 1 : 0;
  return n;
}

int DeviceKernelRank::maxConnections() const { return impl_->comm->tuning().deviceMaxConnections; }

std::chrono::milliseconds DeviceKernelRank::timeout() const {
  return impl_->timeout.count() > 0 ? impl_->timeout : std::chrono::milliseconds(60000);
}

std::vector<int> DeviceKernelRank::peersOf(const Unit& u) const {
  const Impl& m = *impl_;
  const cuda::DevicePlan* dp = nullptr;
  if (auto it = m.lowered.find(u.key); it != m.lowered.end()) dp = it->second.blob.plan();
  std::vector<int> peers;
  if (!dp) {
    if (auto it = m.blobs.find(u.key); it != m.blobs.end()) peers = it->second.peers;
    return peers;
  }
  for (uint32_t k = 0; k < dp->sendLinks; ++k) peers.push_back(cuda::sendLinksOf(dp)[k].peer);
  for (uint32_t k = 0; k < dp->recvLinks; ++k) peers.push_back(cuda::recvLinksOf(dp)[k].peer);
  return peers;
}

std::shared_ptr<LaunchDone> DeviceKernelRank::lastLaunch() const {
  return impl_->pending.empty() ? nullptr : impl_->pending.back();
}

const cuda::InterpModule& DeviceKernelRank::module() const { return world_->module(); }

cuda::CuContext DeviceKernelRank::context() const { return world_->context(); }

Status DeviceKernelRank::failure(std::string* why) const {
  auto* s = static_cast<cuda::DeviceStatus*>(impl_->status.host);
  if (direct_)
    if (Status st = direct_->failure(why); st != Status::kSuccess) return st;
  if (__atomic_load_n(&s->error, __ATOMIC_ACQUIRE) == 0) return Status::kSuccess;
  cuda::DeviceStatus copy;
  std::memcpy(&copy, s, sizeof(copy));
  *why = "rank " + std::to_string(impl_->rank) + ": " + describeStatus(copy);
  switch (static_cast<cuda::DeviceError>(copy.error)) {
    case cuda::DeviceError::kMismatch:
      return Status::kInvalidUsage;
    case cuda::DeviceError::kBadArgs:
      return Status::kInternalError;
    default:
      return Status::kRemoteError;
  }
}

namespace {

// Whether calls on `stream` may meet the other ranks of the process (src/cuda/launch_meeting.h):
// the legacy stream, or every stream sharing one hardware queue.
bool needsMeeting(const Tuning& t, void* stream) {
  return t.deviceMaxConnections <= 1 || stream == nullptr ||
         stream == reinterpret_cast<void*>(uintptr_t{1});
}

}  // namespace

Status DeviceKernelRank::plan(const std::vector<Call>& calls, Unit* unit, std::string* why) {
  Impl& m = *impl_;
  CommView& comm = *m.comm;
  try {
    Unit u;
    if (calls.front().coll == plan::Collective::kSendRecv) {
      // Buffer ids as p2pWork numbers them: Extra + i is call i's buffer.
      u.buffers = {nullptr, nullptr, nullptr};
      for (const Call& c : calls)
        u.buffers.push_back(c.isSend ? const_cast<char*>(static_cast<const char*>(c.send))
                                     : static_cast<char*>(c.recv));
      if (u.buffers.size() > cuda::kMaxDeviceBuffers) {
        *why = "a group of more than " + std::to_string(cuda::kMaxDeviceBuffers - 3) +
               " sends and receives on device memory per rank";
        return Status::kInvalidUsage;
      }
      u.pointToPoint = true;
      u.key.type = static_cast<int>(DataType::kUint8);
      u.key.op = static_cast<int>(RedOp::kSum);
      u.key.p2p.reserve(2 * calls.size());
      for (const Call& c : calls) {
        u.key.p2p.push_back(uint64_t{c.isSend} << 32 | static_cast<uint32_t>(c.root));
        u.key.p2p.push_back(c.count * dataTypeSize(c.type));
      }
      // The Work only where this group's shape was never encoded.
      if (!m.blobs.count(u.key) && !m.lowered.count(u.key)) u.work = comm.p2pWork(calls);
    } else if (direct_ && !needsMeeting(comm.tuning(), calls.front().stream) &&
               direct_->takes(calls.front())) {
      // Direct kernels run where the ranks' launches need no meeting (which carries interpreter
      // launches only): not on the legacy stream, not with one hardware queue.
      u.direct = true;
      u.launch = direct_->launchOf(calls.front());
      *unit = std::move(u);
      return Status::kSuccess;
    } else {
      u.work = comm.workForDevice(calls.front());
      const exec::Work& w = u.work;
      u.key.plan = w.plan.get();
      u.key.type = static_cast<int>(w.type);
      u.key.op = static_cast<int>(w.op);
      std::memcpy(&u.key.scalar, w.scalar.bytes, sizeof u.key.scalar);
      u.key.divisor = w.divisor;
      u.scratchBytes = w.program->scratchElems * dataTypeSize(w.type);
      u.buffers = {w.buffers[plan::kInput], w.buffers[plan::kOutput], nullptr};
    }
    if (!m.blobs.count(u.key)) m.exportReceives(*world_, m.lower(u).blob);
    *unit = std::move(u);
    return Status::kSuccess;
  } catch (const Error& e) {
    *why = e.what();
    return e.code();
  }
}

Status DeviceKernelRank::prepare(const Unit& u, cuda::DeviceRunArgs* args, uint32_t* lanes,
                                 std::string* why) {
  Impl& m = *impl_;
  DeviceWorld& world = *world_;
  try {
    cuda::DeviceRunArgs a;
    const Impl::Blob& blob = m.blobFor(world, u);
    for (size_t i = 0; i < u.buffers.size(); ++i) a.buffers[i] = u.buffers[i];
    if (u.scratchBytes > m.scratchBytes) {
      m.scratch = world.allocate(u.scratchBytes, false);
      m.scratchBytes = u.scratchBytes;
    }
    if (u.scratchBytes > 0) a.buffers[plan::kScratch] = deviceAs<char>(m.scratch);
    if (blob.lanes > m.counterLanes) {
      // Fresh counters: no earlier run used them (the old ones stay for launches still on them).
      m.counterLanes = std::max(kMinCounterLanes, blob.lanes);
      m.counters = world.allocate((m.counterLanes + 2) * sizeof(uint64_t), true);
    }
    a.plan = deviceAs<const cuda::DevicePlan>(blob.mem);
    a.sendFifos = deviceAs<const cuda::DeviceFifo>(blob.mem + blob.sendAt);
    a.recvFifos = deviceAs<const cuda::DeviceFifo>(blob.mem + blob.recvAt);
    a.laneDone = deviceAs<uint64_t>(m.counters);
    a.lanesFinished = deviceAs<uint64_t>(m.counters + m.counterLanes * sizeof(uint64_t));
    a.runs = deviceAs<uint64_t>(m.counters + (m.counterLanes + 1) * sizeof(uint64_t));
    a.abort = world.abortDevice();
    a.status = deviceAs<cuda::DeviceStatus>(m.status.device);
    a.timeoutNs = m.timeoutNs;
    // FIFO counters at GPU scope where every rank is on this GPU (processes included: IPC maps
    // the same GPU memory), at system scope where a peer is on another GPU.
    a.fifoScope = std::all_of(m.busIds.begin(), m.busIds.end(),
                              [&](const std::string& b) { return b == m.busIds[m.rank]; })
                      ? sync::Scope::kGpu
                      : sync::Scope::kSystem;
    *args = a;
    *lanes = blob.lanes;
    return Status::kSuccess;
  } catch (const Error& e) {
    *why = e.what();
    return e.code();
  }
}

void DeviceKernelRank::committed(const std::shared_ptr<LaunchDone>& done, bool collective) {
  Impl& m = *impl_;
  if (collective) ++m.collectives;
  m.prune();
  if (done) m.pending.push_back(done);
  world_->launched(done);
}

}  // namespace weft::cuda
