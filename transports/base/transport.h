// Transports: each says whether it can link two ranks, then builds Connections. The registry
// tries them in priority order (NCCL's canConnect / connect split).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/common/futex.h"
#include "transports/base/connection.h"

namespace weft::transport {

// What ranks learn about each other at init (exchanged by the bootstrap allgather; POD).
struct PeerInfo {
  int32_t rank = 0;
  int32_t pid = 0;
  uint64_t hostHash = 0;     // hostname + boot id
  uint64_t processHash = 0;  // hostHash + pid + process start time: equal iff same process
  // Where the network transport (tcp) listens for this rank: a sockaddr_in or sockaddr_in6
  // (netAddrLen 0 when it does not listen), how many sockets it opens per connection, and the
  // token a connecting peer must present (random per rank and communicator).
  uint8_t netAddr[28] = {};
  uint32_t netAddrLen = 0;
  uint32_t netSockets = 0;
  uint8_t netToken[16] = {};
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
  virtual bool enabled() const = 0;  // environment switches (NCCL_SHM_DISABLE ...)
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer) const = 0;
  // Both ranks call connect() for the pair (in any order); it returns once this side is usable.
  virtual std::unique_ptr<Connection> connect(const ConnectContext& ctx, int peer, int channel) = 0;
  // Before the init allgather: fills what peers need to reach this rank into `self` and keeps
  // any listening state in ctx->endpoints. Most transports need nothing.
  virtual void publish(ConnectContext* ctx, PeerInfo* self) {}
};

// Transports by priority (local, shm, ...).
const std::vector<Transport*>& transports();
// The first enabled transport that can link `self` and `peer`; throws if none can.
Transport& pickTransport(const PeerInfo& self, const PeerInfo& peer);

// This process's identity.
PeerInfo localPeerInfo(int rank);

// Runs publish() of every enabled transport (ctx needs commHash, rank and nranks).
void publishEndpoints(ConnectContext* ctx, PeerInfo* self);

// Each rank's doorbell lives in shared memory so peers of any transport can ring it.
class RankBell {
 public:
  RankBell(uint64_t commHash, int rank);
  ~RankBell();
  Doorbell* bell() const { return bell_; }
  // Removes the name once every peer has mapped the bell, so nothing leaks if a process dies.
  void unlink();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Doorbell* bell_ = nullptr;
};
// Maps the doorbell of `rank`; the mapping lives as long as the
// returned shared pointer.
std::shared_ptr<Doorbell> openPeerBell(uint64_t commHash, int rank,
                                       std::chrono::milliseconds timeout);

// Segment names for a communicator: "/weft.<hash>.<what>".
std::string segmentName(uint64_t commHash, const std::string& what);

}  // namespace weft::transport
