// Ranks that both have an active RDMA port (InfiniBand or RoCE): RC queue pairs per connection
// (transports/ib/connection.h). The queue pair numbers travel over a socket of the tcp engine,
// to the address and token the peer published for tcp, so ib publishes that endpoint too when
// tcp itself is disabled (NCCL_NET=IB). The lower rank of a pair opens the socket, so connect()
// never waits for the peer and ranks may connect in any order.
#include <cstdlib>
#include <cstring>

#include "src/common/log.h"
#include "transports/base/transport.h"
#include "transports/ib/connection.h"
#include "transports/ib/devices.h"
#include "transports/tcp/published.h"

namespace weft::transport {

Transport* tcpTransport();

namespace {

constexpr uint32_t kPublishedMagic = 0x50424957;  // "WIBP"

struct IbPublished {
  uint32_t magic;
  uint32_t ethernet;  // 1: RoCE, 0: InfiniBand
};
static_assert(sizeof(IbPublished) <= sizeof(PeerInfo::rdmaEndpoint), "fits the PeerInfo blob");

bool ibPublishedBy(const PeerInfo& p, IbPublished* out) {
  if (p.rdmaEndpointBytes != sizeof(IbPublished)) return false;
  std::memcpy(out, p.rdmaEndpoint, sizeof(*out));
  return out->magic == kPublishedMagic;
}

class IbTransport : public Transport {
 public:
  const char* name() const override { return "ib"; }

  // NCCL_NET names the network plugin; ours is NCCL's "IB".
  bool enabled(const Tuning& t) const override {
    return !t.ibDisabled && (t.net.empty() || t.net == "ib");
  }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    IbPublished a{}, b{};
    return ibPublishedBy(self, &a) && ibPublishedBy(peer, &b) && a.ethernet == b.ethernet &&
           tcp::publishedBy(self).addrLen > 0 && tcp::publishedBy(peer).addrLen > 0;
  }

  void publish(ConnectContext* ctx, PeerInfo* self) override {
    const Tuning& tuning = tuningOr(ctx->tuning);
    ib::Port port;
    std::string why;
    if (!ib::openPort(tuning.ibHca, tuning.ibGidIndex, &port, &why)) {
      WEFT_INFO(NET, "ib transport unavailable on rank %d: %s", ctx->rank, why.c_str());
      return;
    }
    // The control sockets go through the tcp engine's endpoint.
    if (!tcpTransport()->enabled(tuning)) tcpTransport()->publish(ctx, self);
    if (tcp::publishedBy(*self).addrLen == 0) {
      WEFT_INFO(NET, "ib transport unavailable on rank %d: no tcp endpoint for setup", ctx->rank);
      return;
    }
    IbPublished e{kPublishedMagic, port.ethernet ? 1u : 0u};
    std::memcpy(self->rdmaEndpoint, &e, sizeof(e));
    self->rdmaEndpointBytes = sizeof(e);
    WEFT_INFO(NET, "ib: rank %d uses %s:%d (%s, GID index %d)", ctx->rank, port.device.c_str(),
              port.port, port.ethernet ? "RoCE" : "InfiniBand", port.gidIndex);
  }

  std::unique_ptr<Connection> connect(const ConnectContext& ctx, int peer, int channel) override {
    const Tuning& tuning = tuningOr(ctx.tuning);
    ib::Port port;
    std::string why;
    if (!ib::openPort(tuning.ibHca, tuning.ibGidIndex, &port, &why))
      fail(Status::kSystemError, "ib: rank " + std::to_string(ctx.rank) + ": " + why);
    ib::ConnectionParams p;
    static_cast<remote::ConnectionParams&>(p) = remote::connectionParamsFor(ctx, peer, channel);
    p.qps = tuning.ibQpsPerConnection;
    // Registrations of buffers the user did not register, kept once unused (mr_cache.h says
    // why none are kept by default).
    p.mrRetainedBytes = tuning.ibMrCacheBytes;
    auto conn = std::make_unique<ib::IbConnection>(p, port);
    conn->join(ctx, peer, channel);
    WEFT_INFO(NET, "ib: rank %d %s rank %d channel %d on %s:%d, %d queue pairs", ctx.rank,
              ctx.rank < peer ? "connects to" : "accepts from", peer, channel, port.device.c_str(),
              port.port, p.qps);
    return conn;
  }
};

}  // namespace

Transport* ibTransport() {
  static IbTransport t;
  return &t;
}

}  // namespace weft::transport
