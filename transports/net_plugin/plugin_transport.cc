// Ranks whose processes both loaded the same external network plugin (NCCL_NET_PLUGIN,
// loader.h): plugin connections (plugin_connection.h). As in NCCL, a loaded plugin carries the
// traffic between hosts ahead of Weft's own ib and tcp, and NCCL_NET=<the plugin's name> asks
// for it explicitly (then nothing else is a network transport). The listen handles travel over
// a socket of the tcp engine, to the address and token the peer published for tcp, so the
// plugin publishes that endpoint too when tcp itself is disabled.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "src/common/host_id.h"
#include "src/common/log.h"
#include "transports/base/transport.h"
#include "transports/net_plugin/loader.h"
#include "transports/net_plugin/plugin_connection.h"
#include "transports/tcp/published.h"

namespace weft::transport {

Transport* tcpTransport();

namespace {

std::string lowerCase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What a rank publishes: which plugin it loaded (never 0 where it loaded one).
uint64_t pluginId(const netplugin::NetPlugin& p) {
  return fnv1a("weft-net-plugin:" + lowerCase(p.name()) + ":v" + std::to_string(p.version())) | 1;
}

class NetPluginTransport : public Transport {
 public:
  const char* name() const override { return "net-plugin"; }

  bool enabled(const Tuning& t) const override {
    netplugin::NetPlugin* p = netplugin::pluginFor(t.netPlugin);
    return p && (t.net.empty() || t.net == lowerCase(p->name()));
  }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.netPluginId != 0 && self.netPluginId == peer.netPluginId &&
           tcp::publishedBy(self).addrLen > 0 && tcp::publishedBy(peer).addrLen > 0;
  }

  void publish(ConnectContext* ctx, PeerInfo* self) override {
    const Tuning& tuning = tuningOr(ctx->tuning);
    netplugin::NetPlugin* p = netplugin::pluginFor(tuning.netPlugin);
    if (!p) return;
    // The handles go through the tcp engine's endpoint: published by tcp before the others
    // where it is enabled (registry.cc), else by the plugin now.
    if (!tcpTransport()->enabled(tuning) && tcp::publishedBy(*self).addrLen == 0)
      tcpTransport()->publish(ctx, self);
    if (tcp::publishedBy(*self).addrLen == 0) {
      WEFT_WARN(NET, "net plugin %s unavailable on rank %d: no tcp endpoint for its setup",
                p->name().c_str(), ctx->rank);
      return;
    }
    self->netPluginId = pluginId(*p);
    WEFT_INFO(NET, "rank %d offers net plugin %s (ncclNet v%d, %s)", ctx->rank, p->name().c_str(),
              p->version(), p->path().c_str());
  }

  std::unique_ptr<Connection> connect(const ConnectContext& ctx, int peer, int channel) override {
    const Tuning& tuning = tuningOr(ctx.tuning);
    netplugin::NetPlugin* net = netplugin::pluginFor(tuning.netPlugin);
    if (!net) fail(Status::kInternalError, "net plugin: not loaded at connect");
    netplugin::PluginConnectionParams p;
    static_cast<remote::ConnectionParams&>(p) = remote::connectionParamsFor(ctx, peer, channel);
    p.device = 0;
    auto conn = std::make_unique<netplugin::PluginConnection>(net, p);
    conn->join(ctx, peer, channel);
    WEFT_INFO(NET, "net plugin %s: rank %d %s rank %d channel %d", net->name().c_str(), ctx.rank,
              ctx.rank < peer ? "connects to" : "accepts from", peer, channel);
    return conn;
  }
};

}  // namespace

Transport* netPluginTransport() {
  static NetPluginTransport t;
  return &t;
}

}  // namespace weft::transport
