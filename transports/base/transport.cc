#include "transports/base/transport.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <functional>

#include "src/common/env.h"
#include "src/common/host_id.h"
#include "src/common/log.h"
#include "transports/base/shm_segment.h"

namespace weft::transport {

// Defined by each transport's folder; listed here in priority order.
Transport* localTransport();
Transport* shmTransport();
Transport* tcpTransport();

const std::vector<Transport*>& transports() {
  static const std::vector<Transport*> kAll = {localTransport(), shmTransport(), tcpTransport()};
  return kAll;
}

// NCCL_P2P_DISABLE turns off direct access to a peer's memory: in host mode that is the
// in-process transport (ranks then fall back to shm, like NCCL's P2P -> SHM fallback).
static bool disabledByP2p(const Transport* t) {
  return std::string(t->name()) == "local" && env::getInt("NCCL_P2P_DISABLE") != 0;
}

Transport& pickTransport(const PeerInfo& self, const PeerInfo& peer) {
  for (Transport* t : transports())
    if (t->enabled() && !disabledByP2p(t) && t->canConnect(self, peer)) return *t;
  fail(Status::kSystemError, "no transport can connect rank " + std::to_string(self.rank) +
                                 " to rank " + std::to_string(peer.rank) +
                                 " (different hosts need the tcp transport: check NCCL_NET; "
                                 "is shm disabled?)");
}

void publishEndpoints(ConnectContext* ctx, PeerInfo* self) {
  for (Transport* t : transports())
    if (t->enabled()) t->publish(ctx, self);
}

PeerInfo localPeerInfo(int rank) {
  // Computed per call, never cached: a forked child is a different process with the same memory.
  std::ifstream stat("/proc/self/stat");
  std::string line;
  std::getline(stat, line);
  // Field 22 (start time) is fixed for the life of the process; the fields around it change.
  std::string startTime;
  size_t paren = line.rfind(')');
  if (paren != std::string::npos) {
    std::istringstream fields(line.substr(paren + 2));
    for (int f = 3; f <= 22 && fields >> startTime; ++f) {
    }
  }
  PeerInfo p;
  p.rank = rank;
  p.pid = getpid();
  p.hostHash = hostHash();
  p.processHash = fnv1a(std::to_string(p.hostHash) + ":" + std::to_string(p.pid) + ":" + startTime);
  return p;
}

std::string segmentName(uint64_t commHash, const std::string& what) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "/weft.%016llx.", static_cast<unsigned long long>(commHash));
  return buf + what;
}

struct RankBell::Impl {
  ShmSegment segment;
};

RankBell::RankBell(uint64_t commHash, int rank) : impl_(std::make_unique<Impl>()) {
  impl_->segment = ShmSegment::create(segmentName(commHash, "bell." + std::to_string(rank)),
                                      sizeof(Doorbell));
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
