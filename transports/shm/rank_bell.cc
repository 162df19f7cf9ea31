#include "transports/shm/rank_bell.h"

#include <unistd.h>

#include "transports/shm/segment_names.h"
#include "transports/shm/shm_segment.h"

namespace weft::transport {
namespace {
std::string bellName(uint64_t commHash, int rank, int pid) {
  return segmentName(commHash, "bell." + std::to_string(rank), {pid});
}
}  // namespace

struct RankBell::Impl {
  ShmSegment segment;
};

RankBell::RankBell(uint64_t commHash, int rank) : impl_(std::make_unique<Impl>()) {
  removeStaleSegments();
  impl_->segment = ShmSegment::create(bellName(commHash, rank, getpid()), sizeof(RankBellBlock));
  bell_ = &(new (impl_->segment.data()) RankBellBlock)->bell;
  impl_->segment.markReady();
}

RankBell::~RankBell() {
  impl_.reset();  // unlinks the bell if init never got as far as unlink()
  removeStaleSegments();
}

void RankBell::unlink() { impl_->segment.unlink(); }

void RankBell::markFailed(int causeRank) {
  uint32_t healthy = 0;
  failureWordOf(bell_)->compare_exchange_strong(healthy, failureWord(causeRank),
                                                std::memory_order_acq_rel);
}

std::shared_ptr<Doorbell> openPeerBell(uint64_t commHash, int rank, int pid,
                                       std::chrono::milliseconds timeout) {
  // Every peer maps the segment itself, so the bell stays valid whatever order ranks leave in.
  std::string key = bellName(commHash, rank, pid);
  auto seg = std::make_shared<ShmSegment>(ShmSegment::open(key, sizeof(RankBellBlock), timeout));
  return std::shared_ptr<Doorbell>(seg, static_cast<Doorbell*>(seg->data()));
}

}  // namespace weft::transport
