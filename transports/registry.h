// The transports a communicator may use, in priority order (local, shm, tcp), and the choice
// for a pair of ranks (NCCL's canConnect / connect split): the first enabled transport that can
// link them.
#pragma once
#include <vector>

#include "src/common/tuning.h"
#include "transports/base/transport.h"

namespace weft::transport {

// Transports by priority (local, shm, net plugin, ib, tcp).
const std::vector<Transport*>& transports();
// The first transport enabled under `tuning` that can link `self` and `peer`; throws if none can.
Transport& pickTransport(const PeerInfo& self, const PeerInfo& peer, const Tuning& tuning);

// This process's identity (its host as weft::hostHash names it with `tuning`'s WEFT_HOST_ID).
PeerInfo localPeerInfo(int rank, const Tuning& tuning);

// Runs publish() of every enabled transport (ctx needs commHash, rank, nranks and tuning).
void publishEndpoints(ConnectContext* ctx, PeerInfo* self);

}  // namespace weft::transport
