#include "src/core/communicator.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <thread>

#include "src/common/clock.h"
#include "src/common/doorbell.h"
#include "src/common/env.h"
#include "src/common/log.h"
#include "src/common/reduce.h"
#include "src/core/comm_view.h"
#include "src/core/cpu_placement.h"
#include "src/core/device_path.h"
#include "src/core/plan_maker.h"
#include "src/plan/chunk_plan.h"
#include "transports/base/registration.h"
#include "transports/registry.h"
#include "transports/shm/fifo.h"
#include "transports/shm/rank_bell.h"

namespace weft::core {

// The communicator as its device path sees it.
class Communicator::DeviceView final : public CommView {
 public:
  explicit DeviceView(Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  uint64_t commHash() const override { return comm_.commHash(); }
  const Tuning& tuning() const override { return comm_.tuning(); }
  bool allRanksOnThisHost() const override { return comm_.allRanksOnThisHost(); }
  bool peerInThisProcess(int r) const override { return comm_.peerInThisProcess(r); }
  bootstrap::Bootstrap& bootstrap() override { return comm_.bootstrap(); }
  exec::Work p2pWork(const std::vector<Call>& calls) override { return comm_.p2pWork(calls); }
  exec::Work workForDevice(const Call& call) override { return comm_.workForDevice(call); }

 private:
  Communicator& comm_;
};

namespace {

// What every rank publishes at init.
struct InitInfo {
  transport::PeerInfo peer;
  uint64_t slotBytes;
  uint32_t slots;
  uint32_t synthMode;  // WEFT_SYNTH (PlanMaker::synthesisMode); rank 0's applies to every rank
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
  deviceView_ = std::make_unique<DeviceView>(*this);
  gpu_ = makeDevicePath(*deviceView_, this, cfg.cudaDevice, cfg.cudaBusId);

  std::vector<InitInfo> infos(nranks);
  infos[rank].peer = transport::localPeerInfo(rank, tuning_);
  // Transports that listen for peers (tcp) publish their address before the allgather.
  ctx_.commHash = commHash_;
  ctx_.rank = rank;
  ctx_.nranks = nranks;
  ctx_.selfBell = bell_->bell();
  ctx_.tuning = &tuning_;  // the transports' switches and settings (NCCL_SOCKET_IFNAME, ...)
  transport::publishEndpoints(&ctx_, &infos[rank].peer);
  infos[rank].slotBytes = tuning_.slotBytes;
  infos[rank].slots = tuning_.slots;
  infos[rank].synthMode = PlanMaker::synthesisMode(tuning_);
  infos[rank].cpus = CpuMask::ofThisProcess();
  std::memset(infos[rank].cudaBusId, 0, sizeof(infos[rank].cudaBusId));
  std::memcpy(infos[rank].cudaBusId, cfg.cudaBusId.data(),
              std::min(cfg.cudaBusId.size(), sizeof(infos[rank].cudaBusId) - 1));
  boot_->allgather(infos.data(), sizeof(InitInfo));
  std::vector<std::string> busIds;
  for (auto& i : infos) {
    peers_.push_back(i.peer);
    i.cudaBusId[sizeof(i.cudaBusId) - 1] = 0;
    busIds.emplace_back(i.cudaBusId);
  }
  // Whether the ranks' GPUs reach each other's memory, agreed on by every rank.
  gpu_->agreeOnGpus(std::move(busIds), *boot_);
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
  ctx_.timeout = tuning_.timeout;
  sendSeq_.assign(nranks, 0);
  recvSeq_.assign(nranks, 0);

  // This host's topology (probed once per process, or NCCL_TOPO_FILE) exchanged with every rank.
  topo::LocalRankInfo me;
  me.rank = rank;
  me.nranks = nranks;
  me.hostHash = peers_[rank].hostHash;
  topology_ = std::make_shared<const topo::SystemTopology>(topo::buildSystemTopology(
      me,
      topo::variableAllgather(rank, nranks, [this](void* d, size_t n) { boot_->allgather(d, n); }),
      tuning_));
  topo::reportAtInit(*topology_, rank, tuning_);

  PlanMakerSetup plans;
  plans.rank = rank;
  plans.nranks = nranks;
  plans.slotBytes = ctx_.slotBytes;
  for (const transport::PeerInfo& p : peers_) plans.hostHashes.push_back(p.hostHash);
  plans.sharedCores = sharedCores;
  plans.coreOf = std::move(coreOf);
  plans.synthMode = infos[0].synthMode;
  planMaker_ = std::make_unique<PlanMaker>(plans, tuning_, topology_, *boot_);
  if (rank == 0) {
    static std::once_flag envOnce;
    std::call_once(envOnce, [] { env::dump(); });
    WEFT_INFO(INIT, "%s", describe().c_str());
    WEFT_INFO(ENV, "%s", tuning_.describe().c_str());
    WEFT_INFO(TUNING, "%s", planMaker_->selectorTable().c_str());
  }
}

double Communicator::estimateUs(const Call& call) {
  if (call.coll == plan::Collective::kSendRecv) {
    if (!call.isSend || call.root == rank_ || call.root < 0 || call.root >= nranks_) return 0;
    const double bytes = static_cast<double>(call.count) * dataTypeSize(call.type);
    return planMaker_->transferUs(rank_, call.root, bytes);
  }
  bool inPlace = false;
  std::shared_ptr<const plan::Plan> p = planForCall(call, &inPlace);
  return planMaker_->planUs(*p);
}

const std::string& Communicator::synthOrigin() const { return planMaker_->synthOrigin(); }

Communicator::~Communicator() {
  gpu_->end();
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
  gpu_->dropRegistrations();
}

bool Communicator::allRanksOnThisHost() const {
  for (const auto& p : peers_)
    if (p.hostHash != peers_[rank_].hostHash) return false;
  return true;
}

Status Communicator::pollAsyncError() {
  if (asyncError() == Status::kSuccess) {
    std::string why;
    const Status st = gpu_->failure(&why);
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
  gpu_->raiseAbort();
  if (boot_) boot_->abort();
  announceFailure(rank_);
}

void Communicator::abortDataPath() {
  aborted_.store(true);
  // Ends this rank's launches and its peers' in this process, even if it never called itself.
  gpu_->raiseAbort();
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
