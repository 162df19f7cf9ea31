// Transports: each says whether it can link two ranks, then builds Connections. The registry
// (transports/registry.h) tries them in priority order (NCCL's canConnect / connect split).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/common/doorbell.h"
#include "src/common/tuning.h"
#include "transports/base/connection.h"

namespace weft::transport {

// What ranks learn about each other at init (exchanged by the bootstrap allgather; POD).
struct PeerInfo {
  int32_t rank = 0;
  int32_t pid = 0;
  uint64_t hostHash = 0;     // hostname + boot id
  uint64_t processHash = 0;  // hostHash + pid + process start time: equal iff same process
  // What the network transport publishes so that peers can reach this rank, in its own format
  // (tcp: address, sockets per connection, token); netEndpointBytes 0 where it does not listen.
  uint8_t netEndpoint[64] = {};
  uint32_t netEndpointBytes = 0;
  // What the RDMA transport publishes (ib: that this rank has an active port, and its link
  // layer); rdmaEndpointBytes 0 where it has none.
  uint8_t rdmaEndpoint[16] = {};
  uint32_t rdmaEndpointBytes = 0;
  // The external network plugin this rank loaded (transports/net_plugin), 0 where none.
  uint64_t netPluginId = 0;
};

// Everything a transport needs to connect this rank to a peer.
struct ConnectContext {
  uint64_t commHash = 0;  // equal on all ranks of the communicator, unique per communicator
  int rank = 0;
  int nranks = 0;
  const std::vector<PeerInfo>* peers = nullptr;
  const std::vector<std::shared_ptr<Doorbell>>* bells = nullptr;  // every rank's doorbell, mapped
  uint32_t slots = 4;
  size_t slotBytes = 0;
  std::chrono::milliseconds timeout{0};
  // The communicator's tuning (thresholds and switches of the transports); null: defaults.
  const Tuning* tuning = nullptr;
  // Every rank's failure word (transports/shm/rank_bell.h), for the ranks of this host; null
  // vector or entry where unknown. A connection reads its peer's to learn at once that the peer
  // gave up, even where the peer never opened its end of the link.
  const std::vector<const std::atomic<uint32_t>*>* failures = nullptr;
  // This rank's own doorbell: transports whose progress runs on a thread of their own (tcp) ring
  // it when data arrives or a send slot frees, since a remote peer cannot ring it.
  Doorbell* selfBell = nullptr;
  // Per-communicator state of transports that listen for peers (kept alive with the context).
  std::vector<std::shared_ptr<void>> endpoints;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // The communicator's switches (Tuning: NCCL_SHM_DISABLE, NCCL_NET, ...).
  virtual bool enabled(const Tuning& tuning) const = 0;
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer) const = 0;
  // Both ranks call connect() for the pair (in any order); it returns once this side is usable.
  virtual std::unique_ptr<Connection> connect(const ConnectContext& ctx, int peer, int channel) = 0;
  // Before the init allgather: fills what peers need to reach this rank into `self` and keeps
  // any listening state in ctx->endpoints. Most transports need nothing.
  virtual void publish(ConnectContext* ctx, PeerInfo* self) {}
};

}  // namespace weft::transport
