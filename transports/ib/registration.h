// The process's registration caches (mr_cache.h), one per protection domain: connections on the
// same device share registrations, and ncclCommRegister registers with every device its
// communicator's ib connections use.
#pragma once
#include "transports/ib/mr_cache.h"
#include "transports/ib/verbs.h"

namespace weft::ib {

// User memory is registered for local access and for the peer's RDMA writes (landings).
inline constexpr int kUserAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

// The cache of `pd`, created on first use; never destroyed (connections and communicators of
// any lifetime hold its regions).
MrCache& mrCacheOf(ibv_pd* pd);

}  // namespace weft::ib
