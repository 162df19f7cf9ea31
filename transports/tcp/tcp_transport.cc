// Ranks on different hosts (or any ranks, when shm and local are disabled): sockets through the
// process's tcp engine. The lower rank of a pair opens the sockets, to the address the higher rank
// published at init, and presents the higher rank's token; so connect() never waits for the peer
// and ranks may connect in any order.
#include <algorithm>
#include <cstring>

#include "src/common/log.h"
#include "transports/base/transport.h"
#include "transports/tcp/engine.h"
#include "transports/tcp/link.h"
#include "transports/tcp/published.h"

namespace weft::transport {
namespace {

using tcp::Published;
using tcp::publishedBy;

class TcpTransport : public Transport {
 public:
  const char* name() const override { return "tcp"; }

  // NCCL_NET names the network plugin; ours is NCCL's "Socket".
  bool enabled(const Tuning& t) const override {
    return t.net.empty() || t.net == "socket" || t.net == "tcp";
  }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return publishedBy(self).addrLen > 0 && publishedBy(peer).addrLen > 0;
  }

  void publish(ConnectContext* ctx, PeerInfo* self) override {
    const Tuning& tuning = tuningOr(ctx->tuning);
    bootstrap::SocketAddress addr;
    try {
      addr = tcp::Engine::get().listenAddress(tuning);
    } catch (const Error& e) {
      WEFT_WARN(NET, "tcp transport unavailable on rank %d: %s", ctx->rank, e.what());
      return;
    }
    Published e{};
    if (addr.length() > sizeof(e.addr)) return;
    auto ep = tcp::Engine::get().openEndpoint(ctx->commHash, ctx->rank);
    std::memcpy(e.addr, addr.get(), addr.length());
    e.addrLen = addr.length();
    const int64_t socks = int64_t{tuning.socketsPerThread} * tuning.socketThreads;
    e.sockets = static_cast<uint32_t>(std::clamp<int64_t>(socks, 1, tcp::kMaxSockets));
    std::memcpy(e.token, ep->token(), tcp::kTokenBytes);
    tcp::publishInto(self, e);
    ctx->endpoints.push_back(ep);
  }

  std::unique_ptr<Connection> connect(const ConnectContext& ctx, int peer, int channel) override {
    const PeerInfo& me = (*ctx.peers)[ctx.rank];
    const PeerInfo& other = (*ctx.peers)[peer];
    tcp::LinkParams p;
    p.commHash = ctx.commHash;
    p.rank = ctx.rank;
    p.peer = peer;
    p.channel = channel;
    p.slots = ctx.slots;
    p.slotBytes = ctx.slotBytes;
    p.active = ctx.rank < peer;
    const Published mine = publishedBy(me), theirs = publishedBy(other);
    const Tuning& tuning = tuningOr(ctx.tuning);
    p.sockets = p.active ? mine.sockets : theirs.sockets;
    p.minPart = tuning.tcpMinPart;
    p.bell = ctx.selfBell;
    if (other.hostHash == me.hostHash) p.peerPid = other.pid;
    if (ctx.failures && static_cast<size_t>(peer) < ctx.failures->size())
      p.peerFailure = (*ctx.failures)[peer];
    p.lowat = tuning.tcpLowat;
    p.executorReads = tuning.tcpPoll;
    p.peerAddress =
        bootstrap::SocketAddress(reinterpret_cast<const sockaddr*>(theirs.addr), theirs.addrLen);
    std::memcpy(p.peerToken, theirs.token, tcp::kTokenBytes);
    auto link = std::make_shared<tcp::Link>(p);
    if (p.active) {
      link->start();
    } else {
      auto ep = tcp::Engine::get().findEndpoint(ctx.commHash, ctx.rank);
      if (!ep)
        fail(Status::kInternalError, "tcp: rank " + std::to_string(ctx.rank) +
                                         " has no endpoint (publish() was not called)");
      ep->claim(peer, channel, link);
    }
    WEFT_INFO(NET, "tcp: rank %d %s rank %d channel %d at %s with %u sockets", ctx.rank,
              p.active ? "connects to" : "accepts from", peer, channel,
              p.peerAddress.toString().c_str(), p.sockets);
    return std::make_unique<tcp::TcpConnection>(link, ctx.timeout);
  }
};

}  // namespace

Transport* tcpTransport() {
  static TcpTransport t;
  return &t;
}

}  // namespace weft::transport
