#include "transports/shm/rank_bell.h"

#include <cstdio>

#include "transports/shm/shm_segment.h"

namespace weft::transport {

std::string segmentName(uint64_t commHash, const std::string& what) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "/weft.%016llx.", static_cast<unsigned long long>(commHash));
  return buf + what;
}

struct RankBell::Impl {
  ShmSegment segment;
};

RankBell::RankBell(uint64_t commHash, int rank) : impl_(std::make_unique<Impl>()) {
  impl_->segment =
      ShmSegment::create(segmentName(commHash, "bell." + std::to_string(rank)), sizeof(Doorbell));
  bell_ = new (impl_->segment.data()) Doorbell;
  impl_->segment.markReady();
}

RankBell::~RankBell() = default;

void RankBell::unlink() { impl_->segment.unlink(); }

std::shared_ptr<Doorbell> openPeerBell(uint64_t commHash, int rank,
                                       std::chrono::milliseconds timeout) {
  // Every peer maps the segment itself, so the bell stays valid whatever order ranks leave in.
  std::string key = segmentName(commHash, "bell." + std::to_string(rank));
  auto seg = std::make_shared<ShmSegment>(ShmSegment::open(key, sizeof(Doorbell), timeout));
  return std::shared_ptr<Doorbell>(seg, static_cast<Doorbell*>(seg->data()));
}

}  // namespace weft::transport
