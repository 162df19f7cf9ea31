#include "transports/registry.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include "src/common/env.h"
#include "src/common/host_id.h"
#include "src/common/log.h"

namespace weft::transport {

// Defined by each transport's folder; listed here in priority order.
Transport* localTransport();
Transport* shmTransport();
Transport* tcpTransport();
Transport* netPluginTransport();
#ifdef WEFT_HAVE_IB
Transport* ibTransport();
#endif

const std::vector<Transport*>& transports() {
  static const std::vector<Transport*> kAll = {localTransport(), shmTransport(),
                                               netPluginTransport(),
#ifdef WEFT_HAVE_IB
                                               ibTransport(),
#endif
                                               tcpTransport()};
  return kAll;
}

Transport& pickTransport(const PeerInfo& self, const PeerInfo& peer, const Tuning& tuning) {
  for (Transport* t : transports())
    if (t->enabled(tuning) && t->canConnect(self, peer)) return *t;
  fail(Status::kSystemError, "no transport can connect rank " + std::to_string(self.rank) +
                                 " to rank " + std::to_string(peer.rank) +
                                 " (different hosts need a network transport: check NCCL_NET "
                                 "and NCCL_NET_PLUGIN; is shm disabled?)");
}

void publishEndpoints(ConnectContext* ctx, PeerInfo* self) {
  const Tuning& tuning = tuningOr(ctx->tuning);
  // tcp first where it is enabled: ib and the net plugin set their connections up over the tcp
  // endpoint, and publish it themselves only where tcp is disabled.
  Transport* tcp = tcpTransport();
  if (tcp->enabled(tuning)) tcp->publish(ctx, self);
  for (Transport* t : transports())
    if (t != tcp && t->enabled(tuning)) t->publish(ctx, self);
}

PeerInfo localPeerInfo(int rank, const Tuning& tuning) {
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
  p.hostHash = hostHash(tuning.hostId);
  p.processHash = fnv1a(std::to_string(p.hostHash) + ":" + std::to_string(p.pid) + ":" + startTime);
  return p;
}

}  // namespace weft::transport
