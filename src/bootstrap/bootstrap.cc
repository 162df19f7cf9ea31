// generateUniqueId, describe and the rank side of the rendezvous.
#include "src/bootstrap/bootstrap.h"

#include <algorithm>
#include <string>
#include <vector>

#include "src/bootstrap/interfaces.h"
#include "src/bootstrap/root.h"
#include "src/bootstrap/tcp_bootstrap.h"
#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"
#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::bootstrap {

UniqueIdBytes generateUniqueId(const Tuning& tuning) {
  const std::string& commId = tuning.commId;
  SocketAddress addr =
      commId.empty() ? chooseListenAddress(tuning.socketIfname) : SocketAddress::parse(commId);
  Socket listen = Socket::listen(addr);
  SocketAddress bound = listen.localAddress();
  Secret secret = randomSecret();
  const auto timeout = tuning.bootstrapTimeout;
  UniqueIdBytes id = encodeUniqueId(bound, secret);
  startRoot(std::move(listen), secret, timeout);
  WEFT_INFO(BOOTSTRAP, "bootstrap: root listening on %s (comm hash %016llx)",
            bound.toString().c_str(), static_cast<unsigned long long>(secretHash(secret)));
  return id;
}

IdInfo describe(const UniqueIdBytes& id) {
  DecodedId d = decodeUniqueId(id);
  return IdInfo{d.root.toString(), secretHash(d.secret)};
}

std::unique_ptr<Bootstrap> Bootstrap::create(const UniqueIdBytes& id, int rank, int nranks,
                                             std::chrono::milliseconds timeout,
                                             std::chrono::milliseconds callTimeout) {
  DecodedId d = decodeUniqueId(id);
  if (nranks < 1 || nranks > wire::kMaxRanks)
    fail(Status::kInvalidArgument, "bootstrap: nranks " + std::to_string(nranks) +
                                       " is out of range 1.." + std::to_string(wire::kMaxRanks));
  if (rank < 0 || rank >= nranks)
    fail(Status::kInvalidArgument, "bootstrap: rank " + std::to_string(rank) +
                                       " is out of range for nranks " + std::to_string(nranks));
  if (timeout.count() <= 0) fail(Status::kInvalidArgument, "bootstrap: timeout must be positive");

  Deadline deadline(timeout);
  const std::string me = "bootstrap rank " + std::to_string(rank) + "/" + std::to_string(nranks);
  const std::string root = "root " + d.root.toString();
  // The root may not listen yet when NCCL_COMM_ID names it: retry refusals until the deadline.
  Socket conn = Socket::connect(d.root, deadline, -1, me + ": connecting to " + root,
                                /*retryRefused=*/true);
  // Listen where the route to the root leaves this host: the same family, reachable by peers.
  SocketAddress local = conn.localAddress();
  local.setPort(0);
  Socket listen = Socket::listen(local);
  SocketAddress listenAddress = listen.localAddress();

  uint8_t hello[wire::kRootHelloBytes];
  wire::encodeRootHello(d.secret, {wire::kRootHelloVersion, rank, nranks, listenAddress}, hello);
  conn.sendAll(hello, sizeof(hello), deadline, -1, me + ": sending its hello to " + root);

  const std::string waiting =
      me + ": waiting up to " + std::to_string(timeout.count()) + " ms for all ranks at " + root;
  uint8_t header[wire::kRootReplyHeaderBytes];
  conn.recvAll(header, sizeof(header), deadline, -1, waiting);
  wire::RootReplyHeader h = wire::decodeRootReply(header);
  switch (static_cast<wire::RootStatus>(h.status)) {
    case wire::RootStatus::kOk:
      break;
    case wire::RootStatus::kNranksMismatch:
      fail(Status::kInvalidUsage, me + ": rejected by " + root + ": nranks " +
                                      std::to_string(nranks) + " differs from the other ranks' " +
                                      std::to_string(h.nranks));
    case wire::RootStatus::kDuplicateRank:
    case wire::RootStatus::kRankOutOfRange:
    case wire::RootStatus::kBadHello:
      fail(Status::kInvalidUsage,
           me + ": rejected by " + root + ": " + wire::rootStatusText(h.status));
    case wire::RootStatus::kTimedOut:
      fail(Status::kSystemError, me + ": " + root + " timed out with only " +
                                     std::to_string(h.arrived) + " of " + std::to_string(nranks) +
                                     " ranks arrived");
    default:
      fail(Status::kInternalError,
           me + ": " + root + " replied with unknown status " + std::to_string(h.status));
  }
  if (h.nranks != nranks)
    fail(Status::kInternalError,
         me + ": " + root + " sent a table for " + std::to_string(h.nranks) + " ranks");
  std::vector<uint8_t> table(static_cast<size_t>(nranks) * wire::kAddressBytes);
  conn.recvAll(table.data(), table.size(), deadline, -1, waiting);
  std::vector<SocketAddress> addresses(static_cast<size_t>(nranks));
  for (size_t r = 0; r < addresses.size(); ++r)
    if (!wire::decodeAddress(table.data() + r * wire::kAddressBytes, &addresses[r]))
      fail(Status::kInternalError,
           me + ": " + root + " sent a malformed address for rank " + std::to_string(r));
  if (!(addresses[rank] == listenAddress))
    fail(Status::kInternalError, me + ": " + root + " lists " + addresses[rank].toString() +
                                     " for this rank, which listens on " +
                                     listenAddress.toString());
  conn.close();

  auto b = std::make_unique<TcpBootstrap>(rank, nranks, d.secret, std::move(listen),
                                          std::move(addresses), callTimeout);
  b->connectRing(deadline, timeout);
  WEFT_INFO(BOOTSTRAP, "%s: joined via %s, listening on %s (comm hash %016llx)", me.c_str(),
            root.c_str(), listenAddress.toString().c_str(),
            static_cast<unsigned long long>(b->commHash()));
  return b;
}

}  // namespace weft::bootstrap
