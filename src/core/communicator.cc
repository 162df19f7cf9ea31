#include "src/core/communicator.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>
#include <thread>

#include "src/common/clock.h"
#include "src/common/doorbell.h"
#include "src/common/env.h"
#include "src/common/log.h"
#include "src/common/reduce.h"
#include "src/core/cpu_placement.h"
#include "src/core/device_world.h"
#include "src/core/memory.h"
#include "src/core/rank_gpu.h"
#include "src/core/synth_plans.h"
#include "src/plan/chunk_plan.h"
#include "synth/auto/rank_fabric.h"
#include "synth/model/simulator.h"
#include "transports/base/registration.h"
#include "transports/registry.h"
#include "transports/shm/fifo.h"
#include "transports/shm/rank_bell.h"

namespace weft::core {

CommConfig configFromEnv() {
  CommConfig c;
  c.tuning = Tuning::fromEnvironment();
  return c;
}

namespace {

// What every rank publishes at init.
struct InitInfo {
  transport::PeerInfo peer;
  uint64_t slotBytes;
  uint32_t slots;
  uint32_t synthMode;  // WEFT_SYNTH (synth_plans.h); rank 0's applies to every rank
  CpuMask cpus;        // the process's affinity (cpu_placement.h)
  char cudaBusId[20];  // the rank's GPU (CommConfig::cudaBusId), "" where none
};

}  // namespace

Communicator::Communicator(const bootstrap::UniqueIdBytes& id, int rank, int nranks,
                           const CommConfig& cfg)
    : cfg_(cfg), tuning_(cfg.tuning), rank_(rank), nranks_(nranks) {
  if (nranks < 1)
    fail(Status::kInvalidArgument, "nranks must be >= 1, got " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    fail(Status::kInvalidArgument,
         "rank " + std::to_string(rank) + " out of range [0, " + std::to_string(nranks) + ")");
  enableAsymmetricDoorbells(tuning_.asymmetricFence);  // before any doorbell of it rings
  boot_ = bootstrap::Bootstrap::create(id, rank, nranks, tuning_.bootstrapTimeout, tuning_.timeout);
  commHash_ = boot_->commHash();
  fastConns_ = std::make_unique<std::atomic<transport::Connection*>[]>(static_cast<size_t>(nranks) *
                                                                       kFastChannels);
  static std::atomic<uint64_t> serials{0};
  serial_ = ++serials;
  bell_ = std::make_unique<transport::RankBell>(commHash_, rank);

  std::vector<InitInfo> infos(nranks);
  infos[rank].peer = transport::localPeerInfo(rank);
  // Transports that listen for peers (tcp) publish their address before the allgather.
  ctx_.commHash = commHash_;
  ctx_.rank = rank;
  ctx_.nranks = nranks;
  ctx_.selfBell = bell_->bell();
  ctx_.tuning = &tuning_;  // the transports' switches and settings (NCCL_SOCKET_IFNAME, ...)
  transport::publishEndpoints(&ctx_, &infos[rank].peer);
  infos[rank].slotBytes = tuning_.slotBytes;
  infos[rank].slots = tuning_.slots;
  infos[rank].synthMode = synthesisMode(tuning_);
  infos[rank].cpus = CpuMask::ofThisProcess();
  std::memset(infos[rank].cudaBusId, 0, sizeof(infos[rank].cudaBusId));
  std::memcpy(infos[rank].cudaBusId, cfg.cudaBusId.data(),
              std::min(cfg.cudaBusId.size(), sizeof(infos[rank].cudaBusId) - 1));
  boot_->allgather(infos.data(), sizeof(InitInfo));
  for (auto& i : infos) {
    peers_.push_back(i.peer);
    i.cudaBusId[sizeof(i.cudaBusId) - 1] = 0;
    cudaBusIds_.emplace_back(i.cudaBusId);
  }
  // Whether the ranks' GPUs reach each other's memory: each rank asks for its own GPU, and all
  // agree on the table (asked only where every rank has a GPU, so every rank takes part).
  if (std::none_of(cudaBusIds_.begin(), cudaBusIds_.end(),
                   [](const std::string& b) { return b.empty(); })) {
    std::vector<uint8_t> reach(static_cast<size_t>(nranks) * nranks, 0);
    for (int r = 0; r < nranks; ++r)
      reach[static_cast<size_t>(rank) * nranks + r] =
          gpuReaches(cfg.cudaDevice, cfg.cudaBusId, cudaBusIds_[r]) ? 1 : 0;
    boot_->allgather(reach.data(), static_cast<size_t>(nranks));
    gpusReachEachOther_ = std::all_of(reach.begin(), reach.end(), [](uint8_t v) { return v; });
  }
  // Map every peer's doorbell now, then drop the names: a crashed process leaves nothing behind.
  peerBells_.resize(nranks);
  peerFailures_.assign(nranks, nullptr);
  // Only ranks on this host have a doorbell this rank can map (tcp rings the local one).
  std::vector<LocalRank> local;
  for (int r = 0; r < nranks; ++r) {
    if (peers_[r].hostHash != peers_[rank].hostHash) continue;
    local.push_back({r, peers_[r].processHash, infos[r].cpus});
    if (r != rank) {
      peerBells_[r] =
          transport::openPeerBell(commHash_, r, peers_[r].pid, tuning_.bootstrapTimeout);
      peerFailures_[r] = transport::failureWordOf(peerBells_[r].get());
    }
  }
  const PlacementResult placement = placeRanksOnHost(local, rank, tuning_.pin, tuning_.pinShared);
  const bool sharedCores = placement.oversubscribed;
  tuning_.ranksOnHost = placement.ranks;
  tuning_.sharedCores = sharedCores;
  // Where each rank of this host runs, as placement deals them (pinned or not, the scheduler
  // spreads them much the same way), by its index among the host's ranks.
  std::vector<int> coreOf(nranks, -1);
  for (size_t i = 0; i < local.size(); ++i)
    coreOf[local[i].rank] = coreForSlot(static_cast<int>(i), static_cast<int>(local.size()),
                                        std::max(1, placement.cpus));
  // Ranks dealt to this rank's core; placement pins them all alike, so where this one is pinned
  // they sit there too (where one is not, holding the core costs at most WEFT_HOLD_US a wait).
  if (sharedCores && placement.pinnedCore >= 0 && tuning_.holdNs > 0) {
    bell_->bell()->parks.store(1, std::memory_order_relaxed);  // before the barrier: peers look
    cores_.bells.assign(nranks, nullptr);
    cores_.mate.assign(nranks, 0);
    for (const LocalRank& l : local) {
      if (l.rank == rank || !peerBells_[l.rank]) continue;
      cores_.bells[l.rank] = peerBells_[l.rank].get();
      if (coreOf[l.rank] != coreOf[rank]) continue;
      cores_.mate[l.rank] = 1;
      cores_.mates.push_back(cores_.bells[l.rank]);
    }
  }
  boot_->barrier();
  bell_->unlink();

  // Rank 0's FIFO geometry wins so every rank slices messages the same way.
  ctx_.commHash = commHash_;
  ctx_.rank = rank;
  ctx_.nranks = nranks;
  ctx_.peers = &peers_;
  ctx_.bells = &peerBells_;
  ctx_.failures = &peerFailures_;
  ctx_.slotBytes = std::max<uint64_t>(4096, infos[0].slotBytes / 64 * 64);
  ctx_.slots = std::clamp<uint32_t>(infos[0].slots, 2, transport::kMaxSlots);
  tuning_.slotBytes = ctx_.slotBytes;
  tuning_.slots = ctx_.slots;
  synthMode_ = infos[0].synthMode;
  ctx_.timeout = tuning_.timeout;
  sendSeq_.assign(nranks, 0);
  recvSeq_.assign(nranks, 0);

  // This host's topology (probed once per process, or NCCL_TOPO_FILE) exchanged with every rank.
  topo::LocalRankInfo me;
  me.rank = rank;
  me.nranks = nranks;
  me.hostHash = peers_[rank].hostHash;
  topology_ = std::make_shared<const topo::SystemTopology>(topo::buildSystemTopology(
      me, topo::variableAllgather(rank, nranks,
                                  [this](void* d, size_t n) { boot_->allgather(d, n); })));
  topo::reportAtInit(*topology_, rank, tuning_);

  select::LinkModel model;
  selector_ = std::make_unique<select::Selector>(nranks, model, select::AlgoFilter(tuning_.algo));
  // MSCCL XML plans from MSCCL_ALGO_DIR / WEFT_PLAN_DIR (read once per process).
  if (auto library = select::libraryFromEnvironment(tuning_); !library->empty())
    selector_->setLibrary(std::move(library), ctx_.slotBytes);
  {
    // Ranks on several hosts: the selector also weighs hierarchical plans, with a network model.
    std::vector<int> hostOf(nranks);
    std::vector<uint64_t> hosts;
    for (int r = 0; r < nranks; ++r) {
      auto it = std::find(hosts.begin(), hosts.end(), peers_[r].hostHash);
      hostOf[r] = static_cast<int>(it - hosts.begin());
      if (it == hosts.end()) hosts.push_back(peers_[r].hostHash);
    }
    select::LinkModel net;
    net.alphaUs = tuning_.netLatencyUs;
    // WEFT_NET_GBPS if set, else what the topology found between hosts (GB/s), else the default.
    double gbps = tuning_.netGbps;
    if (double bw = topology_->minInterHostBandwidth(); bw > 0 && !tuning_.netGbpsSet)
      gbps = bw * 8;
    net.betaUsPerByte = 1.0 / (std::max(0.001, gbps) * 125.0);
    selector_->setHosts(hostOf, net);
  }
  selector_->setSharedCores(sharedCores);
  selector_->setCores(std::move(coreOf));
  if (synthesisEnabled(synthMode_, *topology_)) attachSynthesizedPlans();
  if (rank == 0) {
    static std::once_flag envOnce;
    std::call_once(envOnce, [] { env::dump(); });
    WEFT_INFO(INIT, "%s", describe().c_str());
    WEFT_INFO(ENV, "%s", tuning_.describe().c_str());
    WEFT_INFO(TUNING, "%s", selector_->table().c_str());
  }
}

void Communicator::attachSynthesizedPlans() {
  // Synthesis is an optimisation: whatever goes wrong, init goes on with the built-in plans.
  SynthPlans plans;
  std::string skipped;
  try {
    std::string why;
    if (std::optional<synth::Fabric> f = synth::fabricForRanks(*topology_, &why))
      plans = synthesizedPlans(*f, tuning_.synthCacheDir);
    else
      skipped = why;
  } catch (const std::exception& e) {
    skipped = e.what();
  }
  // Every rank must run the same plans (processes synthesize on their own; a time budget or a
  // cache can make them differ): keep them only when every rank holds the same.
  std::vector<uint64_t> digests(nranks_);
  digests[rank_] = plans.digest;
  boot_->allgather(digests.data(), sizeof(uint64_t));
  for (uint64_t d : digests)
    if (d != digests[0]) {
      if (rank_ == 0)
        WEFT_INFO(INIT, "synthesized plans: not used (ranks synthesized different plans)");
      return;
    }
  if (rank_ != 0) {
    if (plans.library) {
      synthOrigin_ = plans.origin;
      selector_->setSynthesized(plans.library, ctx_.slotBytes);
    }
    return;
  }
  if (!skipped.empty()) {
    WEFT_INFO(INIT, "synthesized plans: none (%s)", skipped.c_str());
    return;
  }
  if (!plans.notes.empty()) WEFT_INFO(INIT, "synthesized plans: %s", plans.notes.c_str());
  if (!plans.library) {
    WEFT_INFO(INIT, "synthesized plans: none beats the ring (%s)", plans.origin.c_str());
    return;
  }
  synthOrigin_ = plans.origin;
  selector_->setSynthesized(plans.library, ctx_.slotBytes);
  WEFT_INFO(INIT, "synthesized plans from %s:\n%s", plans.origin.c_str(),
            plans.library->describe().c_str());
}

const synth::Fabric& Communicator::fabric() {
  std::call_once(fabricOnce_, [this] {
    std::string why;
    if (std::optional<synth::Fabric> f = synth::fabricForRanks(*topology_, &why)) {
      fabric_ = std::make_unique<synth::Fabric>(std::move(*f));
    } else {
      const select::LinkModel model;
      fabric_ = std::make_unique<synth::Fabric>(
          synth::fullyConnectedFabric(nranks_, 1.0 / (model.betaUsPerByte * 1e3), model.alphaUs));
    }
  });
  return *fabric_;
}

double Communicator::estimateUs(const Call& call) {
  if (call.coll == plan::Collective::kSendRecv) {
    if (!call.isSend || call.root == rank_ || call.root < 0 || call.root >= nranks_) return 0;
    const synth::Fabric& f = fabric();
    const double bytes = static_cast<double>(call.count) * dataTypeSize(call.type);
    return f.routeLatencyUs(rank_, call.root) + bytes / (f.routeBw(rank_, call.root) * 1e3);
  }
  bool inPlace = false;
  std::shared_ptr<const plan::Plan> p = planForCall(call, &inPlace);
  return synth::simulate(*p, fabric()).timeUs;
}

Communicator::~Communicator() {
  endDeviceCalls();
  {
    std::lock_guard<std::mutex> lock(connMu_);
    for (int i = 0; fastConns_ && i < nranks_ * kFastChannels; ++i) fastConns_[i].store(nullptr);
    // Registrations the user left in place end with the communicator.
    std::lock_guard<std::mutex> regLock(regMu_);
    for (auto& [key, conn] : conns_)
      if (auto* reg = dynamic_cast<transport::MemoryRegistration*>(conn.get()))
        for (const auto& [buff, size] : registered_) reg->deregisterMemory(this, buff, size);
    conns_.clear();
  }
  boot_.reset();
  // Device buffers registered with this communicator are forgotten with it, as NCCL's are.
  dropDeviceRegistrations(this);
}

DeviceCallState& Communicator::deviceCalls(const cuda::DriverApi& api) {
  std::lock_guard<std::mutex> lock(deviceMu_);
  if (!deviceCalls_) deviceCalls_ = std::make_unique<DeviceCallState>(api, tuning_, rank_);
  return *deviceCalls_;
}

void Communicator::endDeviceCalls() {
  std::unique_ptr<DeviceCallState> ending;
  std::unique_ptr<DeviceKernelRank> kernels;
  {
    std::lock_guard<std::mutex> lock(deviceMu_);
    ending = std::move(deviceCalls_);
    kernels = std::move(deviceKernels_);
  }
}

DeviceKernelRank* Communicator::deviceKernels(const cuda::DriverApi& api) {
  std::lock_guard<std::mutex> lock(deviceMu_);
  if (kernelsDecided_) return deviceKernels_.get();
  std::string why;
  deviceKernels_ = DeviceKernelRank::make(api, *this, cfg_.cudaDevice, cudaBusIds_, &why);
  kernelsDecided_ = true;
  if (deviceKernels_)
    WEFT_INFO(INIT, "rank %d: calls on device memory run in the device interpreter's kernel",
              rank_);
  else
    WEFT_INFO(INIT, "rank %d: calls on device memory are staged through host memory: %s", rank_,
              why.c_str());
  return deviceKernels_.get();
}

DeviceKernelRank* Communicator::kernelRank() {
  std::lock_guard<std::mutex> lock(deviceMu_);
  return deviceKernels_.get();
}

bool Communicator::allRanksOnThisHost() const {
  for (const auto& p : peers_)
    if (p.hostHash != peers_[rank_].hostHash) return false;
  return true;
}

Status Communicator::pollAsyncError() {
  if (asyncError() == Status::kSuccess) {
    std::string why;
    Status st = Status::kSuccess;
    {
      std::lock_guard<std::mutex> lock(deviceMu_);
      if (deviceKernels_) st = deviceKernels_->failure(&why);
    }
    if (st != Status::kSuccess) recordError(st, why);
  }
  return asyncError();
}

std::string Communicator::describe() const {
  std::ostringstream out;
  int processes = 0, hosts = 0;
  std::vector<uint64_t> seenProc, seenHost;
  for (const auto& p : peers_) {
    if (std::find(seenProc.begin(), seenProc.end(), p.processHash) == seenProc.end()) {
      seenProc.push_back(p.processHash);
      ++processes;
    }
    if (std::find(seenHost.begin(), seenHost.end(), p.hostHash) == seenHost.end()) {
      seenHost.push_back(p.hostHash);
      ++hosts;
    }
  }
  out << "comm " << std::hex << commHash_ << std::dec << " rank " << rank_ << " nranks " << nranks_
      << " (" << processes << " processes on " << hosts << " hosts), fifo " << ctx_.slots << " x "
      << ctx_.slotBytes << " B, kernels " << simdLevel();
  return out.str();
}

transport::Connection* Communicator::connection(int peer, int channel) {
  if (peer < 0 || peer >= nranks_ || peer == rank_)
    fail(Status::kInternalError, "plan asks rank " + std::to_string(rank_) +
                                     " for a connection to invalid peer " + std::to_string(peer));
  std::atomic<transport::Connection*>* fast = channel >= 0 && channel < kFastChannels
                                                  ? &fastConns_[peer * kFastChannels + channel]
                                                  : nullptr;
  if (fast)
    if (transport::Connection* c = fast->load(std::memory_order_acquire)) return c;
  uint64_t key = static_cast<uint64_t>(peer) << 16 | static_cast<uint64_t>(channel);
  std::lock_guard<std::mutex> lock(connMu_);
  auto it = conns_.find(key);
  if (it != conns_.end()) return it->second.get();
  transport::Transport& t = transport::pickTransport(peers_[rank_], peers_[peer], tuning_);
  auto conn = t.connect(ctx_, peer, channel);
  WEFT_INFO(INIT, "rank %d -> %d channel %d via %s", rank_, peer, channel, t.name());
  if (aborted_.load() || asyncError_.load() != Status::kSuccess) {
    const uint32_t word = transport::failureWordOf(bell_->bell())->load();
    conn->poisonFor(word != 0 ? transport::failureCause(word) : rank_);
  }
  auto* raw = conn.get();
  {
    std::lock_guard<std::mutex> regLock(regMu_);  // connMu_ before regMu_, never the reverse
    for (const auto& [buff, size] : registered_) registerWith(raw, buff, size);
  }
  conns_[key] = std::move(conn);
  if (fast) fast->store(raw, std::memory_order_release);
  return raw;
}

int Communicator::createPreMulSum(const void* scalar, DataType type) {
  PreMulOp op;
  op.live = true;
  op.type = type;
  std::memcpy(op.scalar.bytes, scalar, dataTypeSize(type));
  for (size_t i = 0; i < ops_.size(); ++i)
    if (!ops_[i].live) {
      ops_[i] = op;
      return kNumBuiltinOps + static_cast<int>(i);
    }
  ops_.push_back(op);
  return kNumBuiltinOps + static_cast<int>(ops_.size() - 1);
}

void Communicator::destroyOp(int op) {
  size_t i = static_cast<size_t>(op - kNumBuiltinOps);
  if (op < kNumBuiltinOps || i >= ops_.size() || !ops_[i].live)
    fail(Status::kInvalidArgument,
         "reduction op " + std::to_string(op) + " was not created on this communicator");
  ops_[i].live = false;
}

bool Communicator::validOp(int op, DataType type, std::string* why) const {
  if (op >= 0 && op < kNumBuiltinOps) return true;
  size_t i = static_cast<size_t>(op - kNumBuiltinOps);
  if (op < 0 || i >= ops_.size() || !ops_[i].live) {
    *why = "invalid reduction op " + std::to_string(op);
    return false;
  }
  if (ops_[i].type != type) {
    *why = "PreMulSum op " + std::to_string(op) + " was created for type " +
           dataTypeName(ops_[i].type) + " but used with " + dataTypeName(type);
    return false;
  }
  return true;
}

void Communicator::recordError(Status st, const std::string& message, int causeRank) {
  Status expected = Status::kSuccess;
  asyncError_.compare_exchange_strong(expected, st);
  {
    std::lock_guard<std::mutex> lock(errMu_);
    lastError_ = message;
  }
  WEFT_WARN(INIT, "rank %d: %s", rank_, message.c_str());
  // Tell peers blocked on us that we are gone, so they fail instead of waiting.
  announceFailure(causeRank >= 0 && causeRank < nranks_ ? causeRank : rank_);
}

void Communicator::announceFailure(int causeRank) {
  bell_->markFailed(causeRank);
  // The first cause recorded is the one every link names.
  const int cause = transport::failureCause(transport::failureWordOf(bell_->bell())->load());
  {
    std::lock_guard<std::mutex> lock(connMu_);
    for (auto& [key, conn] : conns_) conn->poisonFor(cause);
  }
  for (const auto& peerBell : peerBells_)
    if (peerBell) peerBell->ring();
}

std::string Communicator::lastError() const {
  std::lock_guard<std::mutex> lock(errMu_);
  return lastError_;
}

bool Communicator::waitForRuns(std::chrono::milliseconds timeout) const {
  const Deadline deadline(timeout);
  while (runs_.load(std::memory_order_acquire) != 0) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

bool Communicator::flushSends(std::chrono::milliseconds timeout) {
  if (aborted_.load() || asyncError() != Status::kSuccess) return true;
  const Deadline deadline(timeout);
  std::lock_guard<std::mutex> lock(connMu_);
  for (auto& [key, conn] : conns_) {
    transport::ReferenceSends* refs = conn->referenceSends();
    if (!refs) continue;
    const uint64_t posted = refs->postedCount();
    std::string why;
    while (!refs->consumed(posted)) {
      if (conn->poisoned() || conn->health(&why) != Status::kSuccess) break;
      if (deadline.expired()) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  return true;
}

void Communicator::awaitPeersOutOfMemory(std::chrono::milliseconds timeout) {
  std::vector<transport::Connection*> links;
  {
    // Links live as long as the communicator, which outlives the failed call that waits here.
    std::lock_guard<std::mutex> lock(connMu_);
    for (auto& [key, conn] : conns_) links.push_back(conn.get());
  }
  const Deadline deadline(timeout);
  for (transport::Connection* c : links)
    if (!c->awaitPeerOutOfMemory(deadline.remaining()))
      WEFT_WARN(INIT, "rank %d: a peer still reads this rank's memory %lld ms after the failure",
                rank_, static_cast<long long>(timeout.count()));
}

void Communicator::abort() {
  aborted_.store(true);
  // Ends this rank's launches and its peers' in this process, even if it never called itself.
  DeviceWorld::raiseAbortOf(commHash_);
  if (boot_) boot_->abort();
  announceFailure(rank_);
}

void Communicator::abortDataPath() {
  aborted_.store(true);
  // Ends this rank's launches and its peers' in this process, even if it never called itself.
  DeviceWorld::raiseAbortOf(commHash_);
  announceFailure(rank_);
}

bool Communicator::revoke() {
  if (revoked_.exchange(true, std::memory_order_acq_rel)) return false;
  abortDataPath();
  return true;
}

void* Communicator::registerBuffer(void* buff, size_t size) {
  {
    std::lock_guard<std::mutex> lock(regMu_);
    registered_[buff] = size;
  }
  // Links that register memory before moving it (ibverbs) register it now; links made later
  // register it as they are made (connection()).
  std::lock_guard<std::mutex> lock(connMu_);
  for (auto& [key, conn] : conns_) registerWith(conn.get(), buff, size);
  return buff;
}

void Communicator::registerWith(transport::Connection* conn, const void* buff, size_t size) {
  auto* reg = dynamic_cast<transport::MemoryRegistration*>(conn);
  std::string why;
  if (reg && size > 0 && !reg->registerMemory(this, buff, size, &why))
    WEFT_INFO(INIT, "rank %d: %s link does not register %zu B: %s", rank_, conn->transportName(),
              size, why.c_str());
}

void Communicator::deregisterBuffer(void* handle) {
  size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(regMu_);
    auto it = registered_.find(handle);
    if (it == registered_.end())
      fail(Status::kInvalidArgument,
           "ncclCommDeregister: handle was not registered on this communicator");
    size = it->second;
    registered_.erase(it);
  }
  std::lock_guard<std::mutex> lock(connMu_);
  for (auto& [key, conn] : conns_)
    if (auto* reg = dynamic_cast<transport::MemoryRegistration*>(conn.get()))
      reg->deregisterMemory(this, handle, size);
}

}  // namespace weft::core
