// The rendezvous behind the Bootstrap interface (bootstrap.h): generateUniqueId, describe and the
// rank side, which ends in a TcpBootstrap. It sits above both the interface and its TCP
// implementation, which is why it is a unit of its own rather than bootstrap.h's.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
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

namespace {

// The longest pause between two attempts to reach the root.
constexpr std::chrono::milliseconds kMaxRetryBackoff{500};

// A failure to reach the root or to hear back from it that a new attempt may cure.
class RetryableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One attempt at the rendezvous: connects to the root, presents the hello and reads the table of
// every rank's listen address. The listen socket is opened on the first attempt and kept.
// Throws RetryableError when the connection fails, Error when the root rejects the rank.
std::vector<SocketAddress> joinRoot(const DecodedId& d, int rank, int nranks,
                                    const Deadline& deadline, const std::string& me,
                                    const std::string& root, const std::string& limit, int attempt,
                                    Socket* listen, SocketAddress* listenAddress) {
  Socket conn;
  try {
    conn = Socket::connect(d.root, deadline, -1, me + ": connecting to " + root,
                           /*retryRefused=*/true);
  } catch (const Error& e) {
    if (deadline.expired())
      fail(Status::kSystemError, me + ": connecting to " + root + ": timed out after " + limit);
    throw RetryableError(e.what());
  }
  if (!listen->valid()) {
    // Listen where the route to the root leaves this host: the same family, reachable by peers.
    SocketAddress local = conn.localAddress();
    local.setPort(0);
    try {
      *listen = Socket::listen(local);
    } catch (const Error& e) {
      throw RetryableError(e.what());  // no free port: TIME_WAITs expire, ports free up
    }
    *listenAddress = listen->localAddress();
  }
  uint8_t hello[wire::kRootHelloBytes];
  wire::encodeRootHello(d.secret, {wire::kRootHelloVersion, rank, nranks, *listenAddress}, hello);
  const std::string waiting =
      me + ": waiting up to " + limit + " for all " + std::to_string(nranks) + " ranks at " + root;
  uint8_t header[wire::kRootReplyHeaderBytes];
  std::vector<uint8_t> table(static_cast<size_t>(nranks) * wire::kAddressBytes);
  wire::RootReplyHeader h;
  try {
    conn.sendAll(hello, sizeof(hello), deadline, -1, me + ": sending its hello to " + root);
    conn.recvAll(header, sizeof(header), deadline, -1, waiting);
    h = wire::decodeRootReply(header);
    if (h.status == static_cast<uint32_t>(wire::RootStatus::kOk) && h.nranks == nranks)
      conn.recvAll(table.data(), table.size(), deadline, -1, waiting);
  } catch (const Error& e) {
    if (deadline.expired() || e.code() != Status::kRemoteError) throw;
    throw RetryableError(e.what());
  }
  switch (static_cast<wire::RootStatus>(h.status)) {
    case wire::RootStatus::kOk:
      break;
    case wire::RootStatus::kNranksMismatch:
      fail(Status::kInvalidUsage, me + ": rejected by " + root + ": nranks " +
                                      std::to_string(nranks) + " differs from the other ranks' " +
                                      std::to_string(h.nranks));
    case wire::RootStatus::kDuplicateRank:
      // After a lost connection the root may not yet have seen the old one end.
      if (attempt > 0) throw RetryableError(me + ": " + root + " still holds its old connection");
      [[fallthrough]];
    case wire::RootStatus::kRankOutOfRange:
    case wire::RootStatus::kBadHello:
      fail(Status::kInvalidUsage,
           me + ": rejected by " + root + ": " + wire::rootStatusText(h.status));
    case wire::RootStatus::kTimedOut:
      fail(Status::kSystemError, me + ": " + root + " timed out with only " +
                                     std::to_string(h.arrived) + " of " + std::to_string(nranks) +
                                     " ranks arrived (bootstrap timeout " + limit + ")");
    default:
      fail(Status::kInternalError,
           me + ": " + root + " replied with unknown status " + std::to_string(h.status));
  }
  if (h.nranks != nranks)
    fail(Status::kInternalError,
         me + ": " + root + " sent a table for " + std::to_string(h.nranks) + " ranks");
  std::vector<SocketAddress> addresses(static_cast<size_t>(nranks));
  for (size_t r = 0; r < addresses.size(); ++r)
    if (!wire::decodeAddress(table.data() + r * wire::kAddressBytes, &addresses[r]))
      fail(Status::kInternalError,
           me + ": " + root + " sent a malformed address for rank " + std::to_string(r));
  if (!(addresses[rank] == *listenAddress))
    fail(Status::kInternalError, me + ": " + root + " lists " + addresses[rank].toString() +
                                     " for this rank, which listens on " +
                                     listenAddress->toString());
  // This rank closes first, so TIME_WAIT stays on its ephemeral port, not the root's port.
  conn.close();
  return addresses;
}

}  // namespace

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
  const std::string limit = std::to_string(timeout.count()) + " ms";
  // A lost root connection (refused while the root starts, reset by a flood, a port still
  // held by an earlier connection) is retried with back-off until the deadline: the root
  // reopens the slot of a rank whose connection ends before the rendezvous completes.
  Socket listen;
  SocketAddress listenAddress;
  std::vector<SocketAddress> addresses;
  std::string lastError;
  auto backoff = std::chrono::milliseconds(5);
  for (int attempt = 0;; ++attempt) {
    try {
      addresses =
          joinRoot(d, rank, nranks, deadline, me, root, limit, attempt, &listen, &listenAddress);
      break;
    } catch (const RetryableError& e) {
      lastError = e.what();
    }
    if (deadline.remaining() <= backoff)
      fail(Status::kSystemError, me + ": could not join the rendezvous at " + root + " within " +
                                     limit + " (" + std::to_string(attempt + 1) +
                                     " attempts); last error: " + lastError);
    WEFT_INFO(BOOTSTRAP, "%s: retrying in %lld ms: %s", me.c_str(),
              static_cast<long long>(backoff.count()), lastError.c_str());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, kMaxRetryBackoff);
  }

  auto b = std::make_unique<TcpBootstrap>(rank, nranks, d.secret, std::move(listen),
                                          std::move(addresses), callTimeout);
  b->connectRing(deadline, timeout);
  WEFT_INFO(BOOTSTRAP, "%s: joined via %s, listening on %s (comm hash %016llx)", me.c_str(),
            root.c_str(), listenAddress.toString().c_str(),
            static_cast<unsigned long long>(b->commHash()));
  return b;
}

}  // namespace weft::bootstrap
