#include "transports/registry.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <functional>

#include "src/common/env.h"
#include "src/common/log.h"

namespace weft::transport {

// Defined by each transport's folder; listed here in priority order.
Transport* localTransport();
Transport* shmTransport();
Transport* tcpTransport();

const std::vector<Transport*>& transports() {
  static const std::vector<Transport*> kAll = {localTransport(), shmTransport(), tcpTransport()};
  return kAll;
}

Transport& pickTransport(const PeerInfo& self, const PeerInfo& peer, const Tuning& tuning) {
  for (Transport* t : transports())
    if (t->enabled(tuning) && t->canConnect(self, peer)) return *t;
  fail(Status::kSystemError, "no transport can connect rank " + std::to_string(self.rank) +
                                 " to rank " + std::to_string(peer.rank) +
                                 " (different hosts need the tcp transport: check NCCL_NET; "
                                 "is shm disabled?)");
}

void publishEndpoints(ConnectContext* ctx, PeerInfo* self) {
  const Tuning defaults;
  const Tuning& tuning = ctx->tuning ? *ctx->tuning : defaults;
  for (Transport* t : transports())
    if (t->enabled(tuning)) t->publish(ctx, self);
}

static uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

static uint64_t hostHash() {
  static const std::string base = [] {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    std::string id = host;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string bootId;
    if (boot >> bootId) id += bootId;
    return id;
  }();
  // Network-namespace "hosts" share hostname and boot id; WEFT_HOST_ID tells them apart. Read per
  // call: a forked test process may set it after its parent computed the base.
  std::string override = env::get("WEFT_HOST_ID");
  return fnv1a(override.empty() ? base : base + "/" + override);
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

}  // namespace weft::transport
