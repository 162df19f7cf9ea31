// Ranks on different hosts (or any ranks, when shm and local are disabled): sockets through the
// process's tcp engine. The lower rank of a pair opens the sockets, to the address the higher rank
// published at init, and presents the higher rank's token; so connect() never waits for the peer
// and ranks may connect in any order.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "src/common/env.h"
#include "src/common/log.h"
#include "transports/base/transport.h"
#include "transports/tcp/engine.h"
#include "transports/tcp/link.h"

namespace weft::transport {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class TcpTransport : public Transport {
 public:
  const char* name() const override { return "tcp"; }

  bool enabled() const override {
    // NCCL_NET names the network plugin; ours is NCCL's "Socket".
    std::string net = lower(env::get("NCCL_NET"));
    return net.empty() || net == "socket" || net == "tcp";
  }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.netAddrLen > 0 && peer.netAddrLen > 0;
  }

  void publish(ConnectContext* ctx, PeerInfo* self) override {
    bootstrap::SocketAddress addr;
    try {
      addr = tcp::Engine::get().listenAddress();
    } catch (const Error& e) {
      WEFT_WARN(NET, "tcp transport unavailable on rank %d: %s", ctx->rank, e.what());
      return;
    }
    if (addr.length() > sizeof(self->netAddr)) return;
    auto ep = tcp::Engine::get().openEndpoint(ctx->commHash, ctx->rank);
    std::memcpy(self->netAddr, addr.get(), addr.length());
    self->netAddrLen = addr.length();
    int64_t socks = env::getInt("NCCL_NSOCKS_PERTHREAD") * env::getInt("NCCL_SOCKET_NTHREADS");
    self->netSockets = static_cast<uint32_t>(std::clamp<int64_t>(socks, 1, tcp::kMaxSockets));
    std::memcpy(self->netToken, ep->token(), tcp::kTokenBytes);
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
    p.sockets = p.active ? me.netSockets : other.netSockets;
    p.minPart = static_cast<uint64_t>(std::max<int64_t>(64, env::getInt("WEFT_TCP_MIN_PART")));
    p.bell = ctx.selfBell;
    p.lowat = env::getInt("WEFT_TCP_LOWAT") != 0;
    p.peerAddress = bootstrap::SocketAddress(reinterpret_cast<const sockaddr*>(other.netAddr),
                                             other.netAddrLen);
    std::memcpy(p.peerToken, other.netToken, tcp::kTokenBytes);
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
