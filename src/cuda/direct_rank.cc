#include "src/cuda/direct_rank.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "src/cuda/device_world.h"
#include "src/exec/lower.h"
#include "src/exec/work.h"

namespace weft::cuda {

// A communicator's mailboxes and statuses on one GPU, shared by its ranks there.
struct DirectMailboxes {
  std::shared_ptr<DeviceWorld> world;  // owns the memory
  CuDevicePtr slots = 0;
  uint32_t slotsPerRank = 0;
  DeviceWorld::HostBlock status;  // DirectStatus[nranks]
};

namespace {

// The mailboxes of each world, made by its first rank.
struct Registry {
  std::mutex mu;
  std::map<const DeviceWorld*, std::weak_ptr<DirectMailboxes>> boxes;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: ranks may leave at exit
  return *r;
}

std::shared_ptr<DirectMailboxes> mailboxesOf(const std::shared_ptr<DeviceWorld>& world, int nranks,
                                             uint32_t slotsPerRank) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  if (auto found = reg.boxes[world.get()].lock()) return found;
  auto b = std::make_shared<DirectMailboxes>();
  b->world = world;
  b->slotsPerRank = slotsPerRank;
  b->slots = world->allocate(sizeof(DirectSlot) * slotsPerRank * static_cast<size_t>(nranks), true);
  b->status = world->hostBlock(sizeof(DirectStatus) * static_cast<size_t>(nranks));
  reg.boxes[world.get()] = b;
  return b;
}

}  // namespace

std::unique_ptr<DirectRank> DirectRank::make(const DriverApi& api, core::CommView& comm,
                                             const std::shared_ptr<DeviceWorld>& world, int device,
                                             bool oneGpu, std::string* why) {
  const Tuning& t = comm.tuning();
  if (!t.direct) {
    *why = "WEFT_DIRECT=0";
    return nullptr;
  }
  if (!oneGpu) {
    *why = "its ranks are on several GPUs";
    return nullptr;
  }
  for (int r = 0; r < comm.size(); ++r)
    if (!comm.peerInThisProcess(r)) {
      *why = "its ranks are in several processes";
      return nullptr;
    }
  if (comm.size() > static_cast<int>(kMaxDirectRanks)) {
    *why = "it has more than " + std::to_string(kMaxDirectRanks) + " ranks";
    return nullptr;
  }
  int sms = 0;
  if (!api.deviceGetAttribute ||
      api.deviceGetAttribute(&sms, kCuDeviceAttributeMultiprocessorCount, device) != kCuSuccess ||
      sms < 1) {
    *why = "the driver does not tell the GPU's multiprocessor count";
    return nullptr;
  }
  std::unique_ptr<DirectKernel> kernel = DirectKernel::find(api, world->module().module(), why);
  if (!kernel) return nullptr;
  std::unique_ptr<DirectRank> d(new DirectRank);
  d->comm_ = &comm;
  d->rank_ = comm.rank();
  d->sms_ = sms;
  d->ranksOnGpu_ = comm.size();
  d->tuning_ = t;
  d->timeoutNs_ = t.timeout.count() > 0 ? static_cast<uint64_t>(t.timeout.count()) * 1000000ull
                                        : ~uint64_t{0} / 2;
  // One slot per rank and block: a rank uses at most the GPU's SMs shared among its ranks.
  const uint32_t perRank = static_cast<uint32_t>(std::max(1, sms / comm.size()));
  d->boxes_ = mailboxesOf(world, comm.size(), perRank);
  d->kernel_ = std::move(kernel);
  return d;
}

DirectRank::~DirectRank() = default;

bool DirectRank::takes(const core::Call& c) const {
  if (!directSupports(c.coll, comm_->size())) return false;
  const bool rooted = c.coll == plan::Collective::kBroadcast || c.coll == plan::Collective::kReduce;
  return !rooted || (c.root >= 0 && c.root < comm_->size());
}

DirectLaunch DirectRank::launchOf(const core::Call& c) const {
  const int n = comm_->size();
  DirectQuery q{c.coll, c.count, c.type, n, sms_, ranksOnGpu_, boxes_->slotsPerRank};
  const DirectShape shape = directShape(q, tuning_);
  DirectLaunch p{};
  p.slots = reinterpret_cast<DirectSlot*>(static_cast<uintptr_t>(boxes_->slots));
  p.abort = boxes_->world->abortDevice();
  p.count = c.count;
  p.timeoutNs = timeoutNs_;
  p.slotsPerRank = boxes_->slotsPerRank;
  p.blocks = shape.blocks;
  p.nranks = n;
  p.root = c.root;
  p.coll = static_cast<uint8_t>(c.coll);
  p.type = static_cast<uint8_t>(c.type);
  p.algo = static_cast<uint8_t>(shape.algo);
  p.scope = static_cast<uint8_t>(DirectScope::kGpu);
  // The operator as the kernels take it, from the one lowering of operators (exec/lower.h,
  // through the communicator, which knows PreMulSum handles' factors): Avg is PreMulSum(1/n) on
  // floats and Sum then a divide by n on integers; a user's PreMulSum carries its scalar.
  exec::Work w = comm_->workForDevice(c);
  if (c.coll == plan::Collective::kReduce && c.op == static_cast<int>(RedOp::kAvg)) {
    // A reduce's result is reduced by every rank, a part each into the root's output: every
    // rank divides its part as the root would.
    w.rank = c.root;
    exec::lowerOperator(&w, RedOp::kAvg, Scalar{});
  }
  const RedOp op = w.op;
  p.scalar = w.scalar;
  p.divisor = w.divisor;
  p.op = static_cast<uint8_t>(op);
  p.ranks = 1;
  p.rank[0].input = c.send;
  p.rank[0].output = c.recv;
  p.rank[0].status =
      reinterpret_cast<DirectStatus*>(static_cast<uintptr_t>(boxes_->status.device)) + rank_;
  p.rank[0].rank = rank_;
  return p;
}

Status DirectRank::failure(std::string* why) const {
  const auto* s = static_cast<const DirectStatus*>(boxes_->status.host) + rank_;
  const uint32_t error = __atomic_load_n(&s->error, __ATOMIC_ACQUIRE);
  if (error == 0) return Status::kSuccess;
  const char* what = "failed";
  switch (static_cast<DirectError>(error)) {
    case DirectError::kTimeout:
      what = "timed out";
      break;
    case DirectError::kAborted:
      what = "aborted";
      break;
    case DirectError::kMismatch:
      what = "found mismatched calls (collective, count, type, operator or root)";
      break;
    default:
      break;
  }
  *why = "rank " + std::to_string(rank_) + ": direct kernel " + what + " in block " +
         std::to_string(s->block) + " of call " + std::to_string(s->epoch) + ", with rank " +
         std::to_string(s->peer) +
         (s->phase == static_cast<uint32_t>(DirectPhase::kStart) ? " at the start" : " at the end");
  if (error == static_cast<uint32_t>(DirectError::kAborted))
    *why += " (this communicator, or another rank of it on this GPU, failed or was aborted)";
  return error == static_cast<uint32_t>(DirectError::kMismatch) ? Status::kInvalidUsage
                                                                : Status::kRemoteError;
}

bool launchesMerge(const DirectLaunch& a, const DirectLaunch& b) {
  if (a.ranks >= kMaxDirectLaunchRanks) return false;
  return a.slots == b.slots && a.count == b.count && a.blocks == b.blocks && a.coll == b.coll &&
         a.type == b.type && a.op == b.op && a.root == b.root && a.divisor == b.divisor &&
         std::memcmp(a.scalar.bytes, b.scalar.bytes, sizeof a.scalar.bytes) == 0;
}

}  // namespace weft::cuda
