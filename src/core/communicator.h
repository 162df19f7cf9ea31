// A communicator: one rank's view of a group of ranks, with its bootstrap, connections, plan
// cache, selector and error state.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/common/tuning.h"
#include "src/core/call.h"
#include "src/core/comm_config.h"
#include "src/core/scratch_pool.h"
#include "src/exec/executor.h"
#include "src/topo/system.h"
#include "transports/base/transport.h"
#include "transports/shm/rank_bell.h"

namespace weft::select {
struct Choice;
}

namespace weft::core {

class DevicePath;
class PlanMaker;

class Communicator : public exec::ConnectionSource {
 public:
  // Joins the rendezvous of `id`; throws weft::Error.
  Communicator(const bootstrap::UniqueIdBytes& id, int rank, int nranks, const CommConfig& cfg);
  ~Communicator() override;

  int rank() const { return rank_; }
  int size() const { return nranks_; }
  const CommConfig& config() const { return cfg_; }
  // What decides how this communicator moves data (see src/common/tuning.h).
  const Tuning& tuning() const { return tuning_; }
  uint64_t commHash() const { return commHash_; }
  uint64_t serial() const { return serial_; }
  bootstrap::Bootstrap& bootstrap() { return *boot_; }
  Doorbell* bell() const { return bell_->bell(); }
  // Who shares this rank's core, where ranks outnumber the cores and it is pinned (else null).
  const exec::CoreSharing* coreSharing() const { return cores_.bells.empty() ? nullptr : &cores_; }

  transport::Connection* connection(int peer, int channel) override;

  // Builds the executor's Work for one collective call (its operator lowered by
  // exec::lowerOperator, as every call's is).
  exec::Work collectiveWork(const Call& call);
  // The same into an existing Work, reusing its storage (the per-call fast path).
  void fillCollectiveWork(const Call& call, exec::Work* w);
  // A Work this communicator filled for an identical call (same buffers, count, type, built-in
  // op, root), ready to run again: only its message tags advance. False (nothing changed) when
  // the Work cannot be reused that way (pooled scratch, a user-defined op).
  bool refillCollectiveWork(const Call& call, exec::Work* w);
  // The same for a Work run straight through (exec::runStraight): the tag the next identical call
  // carries, without taking it; take it (commitStraightCall) only once the call went through.
  uint32_t peekCollectiveTag(const Call& call, const exec::Work& w) const {
    return collectiveTag(collSeq_ + 1, call) ^ w.planTag;
  }
  void commitStraightCall() {
    ++collSeq_;
    straightCalls_.store(straightCalls_.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);  // one writer: the calling thread
  }
  uint64_t straightCalls() const { return straightCalls_.load(std::memory_order_relaxed); }
  // Builds the Work for the point-to-point calls of one group (in call order).
  exec::Work p2pWork(const std::vector<Call>& calls);

  // PreMulSum ops: handle values start at ncclNumOps (5), like NCCL.
  int createPreMulSum(const void* scalar, DataType type);
  void destroyOp(int op);
  bool validOp(int op, DataType type, std::string* why) const;

  // Error state: the first asynchronous error sticks; abort makes every wait give up.
  // `causeRank`: the rank whose failure this is, where known (a peer that died or told this
  // rank it failed); else this rank. The links and the rank's failure word carry it to peers.
  void recordError(Status st, const std::string& message, int causeRank = -1);
  Status asyncError() const { return asyncError_.load(); }
  std::string lastError() const;
  void abort();
  const std::atomic<bool>* abortFlag() const { return &aborted_; }
  // Stops in-flight and future work like abort(), but keeps the bootstrap working, so the
  // survivors can still agree on a shrunk or split communicator (NCCL_SHRINK_ABORT, revoke).
  void abortDataPath();
  // ncclCommRevoke: aborts the data path and marks the communicator revoked; collectives on it
  // fail with kInvalidUsage from then on. False (nothing changed) if it was already revoked.
  bool revoke();
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // Forgets the recorded asynchronous error (a revoked communicator that quiesced reports
  // success, as NCCL's does).
  void clearAsyncError() { asyncError_.store(Status::kSuccess); }

  // Runs of this communicator's work in progress (a call blocked in the executor, a stream's
  // queued call): Abort and Destroy wait for them to leave before freeing what they use. A run
  // that sees the abort flag returns within the executor's longest sleep.
  void enterRun() { runs_.fetch_add(1, std::memory_order_acq_rel); }
  void leaveRun() { runs_.fetch_sub(1, std::memory_order_acq_rel); }
  // Waits up to `timeout` for every run to leave; false if one is still inside.
  bool waitForRuns(std::chrono::milliseconds timeout) const;
  // Waits up to `timeout` until each peer has taken every message this rank posted to it (a
  // peer may open a link only when its plan first uses it, after this rank's calls returned;
  // the link's memory and name go with the communicator, so what it holds must be read first).
  // Skipped once the communicator failed or was aborted; stops early at a poisoned link or a
  // dead peer. False if a message was still unread at the deadline.
  bool flushSends(std::chrono::milliseconds timeout);
  // After a failed call has poisoned the links: waits, for at most `timeout` in all, until no
  // peer reads this rank's memory in place any more (Connection::awaitPeerOutOfMemory).
  void awaitPeersOutOfMemory(std::chrono::milliseconds timeout);

  // Calls on device memory (src/core/device_path.h): the staged and kernel paths, and every
  // rank's GPU as init found it.
  DevicePath& gpu() { return *gpu_; }
  // Whether every rank of this communicator lives on this host; whether rank `r` lives in this
  // process.
  bool allRanksOnThisHost() const;
  bool peerInThisProcess(int r) const { return peers_[r].processHash == peers_[rank_].processHash; }
  // The Work of a collective call on device memory: what collectiveWork's holds before the host
  // executor's own parts (links, tags, scratch): plan, program, rank, type, the user's buffers
  // and the operator lowered exactly as for the host (exec::lowerOperator). The device path
  // encodes it (src/cuda/device_plan.h); it takes no message tag and no host scratch.
  exec::Work workForDevice(const Call& call);
  // asyncError(), after taking in a failure the kernel path's launches recorded.
  Status pollAsyncError();

  // Registered buffers (ncclCommRegister).
  void* registerBuffer(void* buff, size_t size);
  void deregisterBuffer(void* handle);
  // Registers a buffer of ncclCommRegister with a link that registers memory (ibverbs).
  void registerWith(transport::Connection* conn, const void* buff, size_t size);

  std::string describe() const;

  // The system topology: every rank's host graph, joined by the network, ranks placed on nodes.
  const topo::SystemTopology& topology() const { return *topology_; }

  // The cost model's time for one call in microseconds (src/core/plan_maker.h): the plan the
  // call would run (the same selection as collectiveWork), simulated on the ranks' fabric;
  // nothing is executed. Send / Recv: one transfer over the route to the peer.
  double estimateUs(const Call& call);
  // Where the synthesized plans came from ("" when synthesis is off or nothing won).
  const std::string& synthOrigin() const;

 private:
  const plan::Plan& planFor(const plan::Spec& spec, const select::Choice& choice,
                            std::shared_ptr<const plan::Plan>* holder);
  // The plan of a collective call (cached by shape); sets *inPlace.
  std::shared_ptr<const plan::Plan> planForCall(const Call& call, bool* inPlace);
  // The part of a collective call's Work both paths share: plan, program, rank, type, tuning,
  // the user's buffers (scratch left null) and the lowered operator.
  void fillCallWork(const Call& call, exec::Work& w);
  // Tells the peers this rank gave up because of `causeRank`: marks its failure word, poisons
  // its links naming the cause, and rings the doorbells of the ranks on its host so that those
  // waiting on it look at once.
  void announceFailure(int causeRank);
  uint32_t nextCollectiveTag(const Call& call) { return collectiveTag(++collSeq_, call); }
  static uint32_t collectiveTag(uint64_t seq, const Call& call);

  CommConfig cfg_;
  Tuning tuning_;
  int rank_ = 0;
  int nranks_ = 0;
  std::unique_ptr<bootstrap::Bootstrap> boot_;
  uint64_t commHash_ = 0;
  uint64_t serial_ = 0;  // unique in this process, unlike the address (reused after destroy)
  std::unique_ptr<transport::RankBell> bell_;
  std::vector<transport::PeerInfo> peers_;
  std::vector<std::shared_ptr<Doorbell>> peerBells_;
  // The failure words of this host's ranks (rank_bell.h), null for ranks elsewhere.
  std::vector<const std::atomic<uint32_t>*> peerFailures_;
  exec::CoreSharing cores_;
  transport::ConnectContext ctx_;
  std::shared_ptr<const topo::SystemTopology> topology_;
  std::unique_ptr<PlanMaker> planMaker_;
  // The communicator as its device path sees it (src/core/comm_view.h), and that path; the view
  // outlives the path.
  class DeviceView;
  std::unique_ptr<DeviceView> deviceView_;
  std::unique_ptr<DevicePath> gpu_;

  std::mutex connMu_;
  std::unordered_map<uint64_t, std::unique_ptr<transport::Connection>> conns_;
  // Lock-free copies of conns_ for the first channels, read on every step of every call.
  static constexpr int kFastChannels = 16;
  std::unique_ptr<std::atomic<transport::Connection*>[]> fastConns_;

  std::shared_ptr<ScratchPool> scratch_ = std::make_shared<ScratchPool>();
  static constexpr size_t kInlineScratchBytes = 64 * 1024;  // smaller scratch lives in the Work

  std::mutex planMu_;
  std::unordered_map<std::string, std::shared_ptr<const plan::Plan>> plans_;
  // The plan chosen for a call's shape, so repeated calls skip selection and plan lookup.
  struct CallShape {
    uint64_t count = 0;
    int32_t root = 0;
    uint32_t elemSize = 0;
    plan::Collective coll = plan::Collective::kAllReduce;
    bool inPlace = false;
    bool scalesInput = false;  // PreMulSum: in-place-only library plans do not apply
    bool operator==(const CallShape&) const = default;
  };
  struct CallShapeHash {
    size_t operator()(const CallShape& k) const {
      return std::hash<uint64_t>()(k.count * 1000003u ^ (static_cast<uint64_t>(k.coll) << 56) ^
                                   (static_cast<uint64_t>(k.root) << 40) ^
                                   (static_cast<uint64_t>(k.elemSize) << 32) ^ k.inPlace ^
                                   (static_cast<uint64_t>(k.scalesInput) << 1));
    }
  };
  std::unordered_map<CallShape, std::shared_ptr<const plan::Plan>, CallShapeHash> shapePlans_;
  // The last call's shape and plan: a repeated call skips the map and its lock (calls on one
  // communicator come from one thread at a time, as NCCL requires).
  CallShape lastShape_;
  std::shared_ptr<const plan::Plan> lastPlan_;

  uint64_t collSeq_ = 0;
  std::atomic<uint64_t> straightCalls_{0};
  std::vector<uint64_t> sendSeq_, recvSeq_;

  struct PreMulOp {
    bool live = false;
    DataType type = DataType::kFloat32;
    Scalar scalar;
  };
  std::vector<PreMulOp> ops_;

  std::mutex regMu_;
  std::unordered_map<void*, size_t> registered_;

  std::atomic<Status> asyncError_{Status::kSuccess};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> revoked_{false};
  std::atomic<int> runs_{0};
  mutable std::mutex errMu_;
  std::string lastError_;
};

}  // namespace weft::core
