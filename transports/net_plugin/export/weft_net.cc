// libnccl-net-weft.so: Weft's own transports behind NCCL's network plugin ABI (ncclNet_v11 and
// ncclNet_v10, nccl_net.h), so that NCCL, or Weft itself (NCCL_NET_PLUGIN), can move its
// inter-host traffic over them. The plugin is named "Weft" (NCCL_NET=Weft selects it).
//
// Devices: where libibverbs finds an active RDMA port (NCCL_IB_HCA, NCCL_IB_GID_INDEX pick it as
// for the ib transport), device 0 is that port and the last device is the socket one; otherwise
// only the socket device. A comm is one of Weft's connections (net_comm.h): tcp through the
// plugin's own tcp engine, or ib queue pairs set up over such a socket.
//
// listen() opens an endpoint of the tcp engine under a fresh random id; the handle carries its
// address, the id, the endpoint's token and the connection's shape (kind, sockets, slots), so a
// connecting peer needs nothing else. Each listen handle takes one connection, as NCCL uses it.
// connect() and accept() return at once: data waits in slots until the sockets are up, and a
// peer that never comes fails the comm's requests when it is known dead (test() errors).
#include <algorithm>
#include <cstdarg>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "src/common/error.h"
#include "src/common/log.h"
#include "src/common/tuning.h"
#include "src/core/comm_config.h"
#include "transports/net_plugin/export/net_comm.h"
#include "transports/net_plugin/nccl_net.h"
#include "transports/tcp/engine.h"
#include "transports/tcp/link.h"
#ifdef WEFT_HAVE_IB
#include "transports/ib/connection.h"
#include "transports/ib/devices.h"
#endif

namespace weft::netplugin {
namespace {

constexpr uint32_t kHandleMagic = 0x4e574657;  // "WFWN"
constexpr uint32_t kSlots = 8;
constexpr uint32_t kSlotBytes = 262144;
constexpr auto kCloseTimeout = std::chrono::milliseconds(10000);

enum class Kind : uint16_t { kSocket = 0, kIb = 1 };

struct Handle {
  uint32_t magic;
  uint16_t kind;
  uint16_t sockets;
  uint32_t addrLen;
  uint8_t addr[28];
  uint8_t token[tcp::kTokenBytes];
  uint64_t id;  // the endpoint's id (the tcp engine's communicator hash)
  uint32_t slots;
  uint32_t slotBytes;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE);

struct Device {
  Kind kind;
  std::string name;
#ifdef WEFT_HAVE_IB
  ib::Port port;
#endif
};

// The process's plugin: set up by the first init() (the environment's settings then), kept
// for the life of the process like the tcp engine it drives.
struct Plugin {
  std::mutex mu;
  bool ready = false;
  Tuning tuning;
  std::vector<Device> devices;
  int inits = 0;
};

Plugin& plugin() {
  static Plugin* p = new Plugin;  // never destroyed: comms may outlive static destruction
  return *p;
}

struct ListenComm {
  Kind kind;
  int dev;
  std::shared_ptr<tcp::Endpoint> endpoint;
  uint32_t sockets;
  bool accepted = false;
};

ncclNetResult_t guard(const char* what, auto&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    WEFT_WARN(NET, "weft net plugin: %s: %s", what, e.what());
    return kNcclNetSystemError;
  }
}

ncclNetResult_t initPlugin() {
  return guard("init", [] {
    Plugin& p = plugin();
    std::lock_guard<std::mutex> lock(p.mu);
    ++p.inits;
    if (p.ready) return kNcclNetSuccess;
    p.tuning = core::configFromEnv().tuning;  // the knobs as a communicator's init reads them
    p.devices.clear();
#ifdef WEFT_HAVE_IB
    ib::Port port;
    std::string why;
    if (!p.tuning.ibDisabled && ib::openPort(p.tuning.ibHca, p.tuning.ibGidIndex, &port, &why)) {
      Device d{Kind::kIb, "weft-ib:" + port.device + ":" + std::to_string(port.port), port};
      p.devices.push_back(d);
    } else {
      WEFT_INFO(NET, "weft net plugin: no ib device (%s)", why.c_str());
    }
#endif
    // The socket device: the engine's listener decides the interface (NCCL_SOCKET_IFNAME).
    tcp::Engine::get().listenAddress(p.tuning);
    Device sock;
    sock.kind = Kind::kSocket;
    sock.name = "weft-socket";
    p.devices.push_back(sock);
    p.ready = true;
    return kNcclNetSuccess;
  });
}

const Device* device(int dev) {
  Plugin& p = plugin();
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.ready || dev < 0 || dev >= static_cast<int>(p.devices.size())) return nullptr;
  return &p.devices[dev];
}

ncclNetResult_t devices(int* ndev) {
  Plugin& p = plugin();
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.ready) return kNcclNetInvalidUsage;
  *ndev = static_cast<int>(p.devices.size());
  return kNcclNetSuccess;
}

template <class Props>
ncclNetResult_t properties(int dev, Props* props) {
  const Device* d = device(dev);
  if (!d || !props) return kNcclNetInvalidArgument;
  std::memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(d->name.c_str());
  props->pciPath = nullptr;
  props->guid = static_cast<uint64_t>(dev) + 1;
  props->ptrSupport = NCCL_PTR_HOST;
  props->speed = d->kind == Kind::kIb ? 100000 : 10000;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = size_t{1} << 31;
  props->maxCollBytes = size_t{1} << 31;
  return kNcclNetSuccess;
}

ncclNetResult_t listen(int dev, void* handleOut, void** listenComm) {
  *listenComm = nullptr;
  return guard("listen", [&] {
    const Device* d = device(dev);
    if (!d || !handleOut) return kNcclNetInvalidArgument;
    Plugin& p = plugin();
    const bootstrap::SocketAddress addr = tcp::Engine::get().listenAddress(p.tuning);
    if (addr.length() > sizeof(Handle::addr)) return kNcclNetInternalError;
    uint64_t id = 0;
    std::random_device rd;
    while (id == 0) id = (uint64_t{rd()} << 32) | rd();
    auto lc = std::make_unique<ListenComm>();
    lc->kind = d->kind;
    lc->dev = dev;
    lc->endpoint = tcp::Engine::get().openEndpoint(id, 1);
    const int64_t socks = int64_t{p.tuning.socketsPerThread} * p.tuning.socketThreads;
    lc->sockets = static_cast<uint32_t>(std::clamp<int64_t>(socks, 1, tcp::kMaxSockets));
    Handle h{};
    h.magic = kHandleMagic;
    h.kind = static_cast<uint16_t>(d->kind);
    h.sockets = static_cast<uint16_t>(lc->sockets);
    h.addrLen = addr.length();
    std::memcpy(h.addr, addr.get(), addr.length());
    std::memcpy(h.token, lc->endpoint->token(), tcp::kTokenBytes);
    h.id = id;
    h.slots = kSlots;
    h.slotBytes = kSlotBytes;
    std::memset(handleOut, 0, NCCL_NET_HANDLE_MAXSIZE);
    std::memcpy(handleOut, &h, sizeof(h));
    *listenComm = lc.release();
    return kNcclNetSuccess;
  });
}

// What the handle says, checked: it comes from the peer.
bool readHandle(const void* raw, Handle* h, std::string* why) {
  std::memcpy(h, raw, sizeof(*h));
  if (h->magic != kHandleMagic) return *why = "not a Weft handle (magic)", false;
  if (h->kind != static_cast<uint16_t>(Kind::kSocket) &&
      h->kind != static_cast<uint16_t>(Kind::kIb))
    return *why = "unknown connection kind " + std::to_string(h->kind), false;
  if (h->sockets < 1 || h->sockets > tcp::kMaxSockets)
    return *why = "bad socket count " + std::to_string(h->sockets), false;
  if (h->slots != kSlots || h->slotBytes != kSlotBytes)
    return *why = "slot shape " + std::to_string(h->slots) + " x " + std::to_string(h->slotBytes) +
                  " differs from this build's",
           false;
  sa_family_t family = 0;
  std::memcpy(&family, h->addr, sizeof(family));
  const bool ok = (family == AF_INET && h->addrLen == sizeof(sockaddr_in)) ||
                  (family == AF_INET6 && h->addrLen == sizeof(sockaddr_in6));
  if (!ok) return *why = "bad address (family " + std::to_string(family) + ")", false;
  return true;
}

const Device* deviceOfKind(Kind kind) {
  Plugin& p = plugin();
  std::lock_guard<std::mutex> lock(p.mu);
  for (const Device& d : p.devices)
    if (d.kind == kind) return &d;
  return nullptr;
}

ncclNetResult_t connect(int dev, void* rawHandle, void** sendComm) {
  *sendComm = nullptr;
  return guard("connect", [&] {
    if (!device(dev) || !rawHandle) return kNcclNetInvalidArgument;
    Handle h;
    std::string why;
    if (!readHandle(rawHandle, &h, &why)) {
      WEFT_WARN(NET, "weft net plugin: connect: %s", why.c_str());
      return kNcclNetInvalidArgument;
    }
    const Device* d = deviceOfKind(static_cast<Kind>(h.kind));
    if (!d) {
      WEFT_WARN(NET, "weft net plugin: connect: the peer listens on ib, this process has none");
      return kNcclNetInvalidUsage;
    }
    // Starts this process's engine where it has not run yet (a forked child has none).
    tcp::Engine::get().listenAddress(plugin().tuning);
    bootstrap::SocketAddress peer(reinterpret_cast<const sockaddr*>(h.addr), h.addrLen);
    const std::string name = "peer at " + peer.toString();
    std::unique_ptr<transport::Connection> conn;
    if (d->kind == Kind::kSocket) {
      tcp::LinkParams lp;
      lp.commHash = h.id;
      lp.rank = 0;
      lp.peer = 1;
      lp.slots = h.slots;
      lp.slotBytes = h.slotBytes;
      lp.sockets = h.sockets;
      lp.minPart = plugin().tuning.tcpMinPart;
      lp.active = true;
      lp.peerAddress = peer;
      std::memcpy(lp.peerToken, h.token, tcp::kTokenBytes);
      auto link = std::make_shared<tcp::Link>(lp);
      link->start();
      conn = std::make_unique<tcp::TcpConnection>(link, kCloseTimeout);
    } else {
#ifdef WEFT_HAVE_IB
      ib::ConnectionParams ip;
      ip.commHash = h.id;
      ip.rank = 0;
      ip.peer = 1;
      ip.slots = h.slots;
      ip.slotBytes = h.slotBytes;
      ip.qps = plugin().tuning.ibQpsPerConnection;
      ip.timeout = plugin().tuning.timeout;
      auto ibc = std::make_unique<ib::IbConnection>(ip, d->port);
      ibc->start(peer, h.token);
      conn = std::move(ibc);
#endif
    }
    WEFT_INFO(NET, "weft net plugin: %s send comm to %s", d->name.c_str(), name.c_str());
    *sendComm = new NetComm(std::move(conn), true, name);
    return kNcclNetSuccess;
  });
}

ncclNetResult_t accept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  return guard("accept", [&] {
    auto* lc = static_cast<ListenComm*>(listenComm);
    if (!lc) return kNcclNetInvalidArgument;
    if (lc->accepted) return kNcclNetInvalidUsage;  // one connection per listen handle
    const Device* d = device(lc->dev);
    if (!d) return kNcclNetInvalidArgument;
    const std::string name = "peer of listener " + std::to_string(lc->endpoint->commHash());
    std::unique_ptr<transport::Connection> conn;
    if (lc->kind == Kind::kSocket) {
      tcp::LinkParams lp;
      lp.commHash = lc->endpoint->commHash();
      lp.rank = 1;
      lp.peer = 0;
      lp.slots = kSlots;
      lp.slotBytes = kSlotBytes;
      lp.sockets = lc->sockets;
      lp.minPart = plugin().tuning.tcpMinPart;
      lp.active = false;
      auto link = std::make_shared<tcp::Link>(lp);
      lc->endpoint->claim(0, 0, link);
      conn = std::make_unique<tcp::TcpConnection>(link, kCloseTimeout);
    } else {
#ifdef WEFT_HAVE_IB
      ib::ConnectionParams ip;
      ip.commHash = lc->endpoint->commHash();
      ip.rank = 1;
      ip.peer = 0;
      ip.slots = kSlots;
      ip.slotBytes = kSlotBytes;
      ip.qps = plugin().tuning.ibQpsPerConnection;
      ip.timeout = plugin().tuning.timeout;
      auto ibc = std::make_unique<ib::IbConnection>(ip, d->port);
      lc->endpoint->claim(0, 0, ibc->awaitPeer());
      conn = std::move(ibc);
#endif
    }
    WEFT_INFO(NET, "weft net plugin: %s recv comm from %s", d->name.c_str(), name.c_str());
    lc->accepted = true;
    // The endpoint stays open as long as the comm: the peer's sockets may arrive later.
    *recvComm = new NetComm(std::move(conn), false, name, lc->endpoint);
    return kNcclNetSuccess;
  });
}

// Host memory needs no registration with Weft's connections (they copy through their own
// registered slots or send from the caller's memory): the handle only records the type.
int kHostMr = NCCL_PTR_HOST;

ncclNetResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (!comm || !mhandle) return kNcclNetInvalidArgument;
  if (type != NCCL_PTR_HOST) return kNcclNetInvalidUsage;
  *mhandle = &kHostMr;
  return kNcclNetSuccess;
}
ncclNetResult_t regMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return kNcclNetInvalidUsage;
}
ncclNetResult_t deregMr(void* comm, void* mhandle) {
  return comm && mhandle == &kHostMr ? kNcclNetSuccess : kNcclNetInvalidArgument;
}

ncclNetResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void*,
                      void** request) {
  if (!sendComm || !request) return kNcclNetInvalidArgument;
  return guard("isend",
               [&] { return static_cast<NetComm*>(sendComm)->isend(data, size, tag, request); });
}

ncclNetResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void**, void**,
                      void** request) {
  if (!recvComm || !request || !sizes || !tags || !data) return kNcclNetInvalidArgument;
  if (n != 1) return kNcclNetInvalidUsage;  // maxRecvs is 1
  return guard("irecv", [&] {
    return static_cast<NetComm*>(recvComm)->irecv(data[0], sizes[0], tags[0], request);
  });
}

ncclNetResult_t iflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;  // host memory: nothing to flush
  return kNcclNetSuccess;
}

ncclNetResult_t test(void* request, int* done, int* sizes) {
  if (!request || !done) return kNcclNetInvalidArgument;
  auto* r = static_cast<NetRequest*>(request);
  return guard("test", [&] { return r->comm->test(r, done, sizes); });
}

ncclNetResult_t closeComm(void* comm) {
  if (!comm) return kNcclNetInvalidArgument;
  return guard("close", [&] {
    delete static_cast<NetComm*>(comm);
    return kNcclNetSuccess;
  });
}
ncclNetResult_t closeListen(void* listenComm) {
  delete static_cast<ListenComm*>(listenComm);
  return kNcclNetSuccess;
}
ncclNetResult_t getDeviceMr(void*, void*, void**) { return kNcclNetInvalidUsage; }
ncclNetResult_t irecvConsumed(void*, int, void*) { return kNcclNetSuccess; }
ncclNetResult_t makeVDevice(int*, ncclNetVDeviceProps_v11_t*) { return kNcclNetInvalidUsage; }

// v11 entry points.
ncclNetResult_t initV11(void** ctx, uint64_t, ncclNetCommConfig_t*, ncclDebugLogger_t,
                        ncclProfilerCallback_t) {
  ncclNetResult_t r = initPlugin();
  if (ctx) *ctx = r == kNcclNetSuccess ? &plugin() : nullptr;
  return r;
}
ncclNetResult_t getPropertiesV11(int dev, ncclNetProperties_v11_t* props) {
  ncclNetResult_t r = properties(dev, props);
  if (r == kNcclNetSuccess) props->maxMultiRequestSize = 1;
  return r;
}
ncclNetResult_t listenV11(void*, int dev, void* handle, void** listenComm) {
  return listen(dev, handle, listenComm);
}
ncclNetResult_t connectV11(void*, int dev, void* handle, void** sendComm,
                           ncclNetDeviceHandle_t** devComm) {
  if (devComm) *devComm = nullptr;
  return connect(dev, handle, sendComm);
}
ncclNetResult_t acceptAny(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** devComm) {
  if (devComm) *devComm = nullptr;
  return accept(listenComm, recvComm);
}
ncclNetResult_t finalizeV11(void*) { return kNcclNetSuccess; }
ncclNetResult_t setNetAttr(void*, ncclNetAttr_v11_t*) { return kNcclNetSuccess; }

// v10 entry points.
ncclNetResult_t initV10(ncclDebugLogger_t, ncclProfilerCallback_t) { return initPlugin(); }
ncclNetResult_t getPropertiesV10(int dev, ncclNetProperties_v10_t* props) {
  return properties(dev, props);
}
ncclNetResult_t connectV10(int dev, ncclNetCommConfig_t*, void* handle, void** sendComm,
                           ncclNetDeviceHandle_t** devComm) {
  if (devComm) *devComm = nullptr;
  return connect(dev, handle, sendComm);
}

}  // namespace
}  // namespace weft::netplugin

using namespace weft::netplugin;

extern "C" {

__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    "Weft",        initV11,     devices,     getPropertiesV11, listenV11,   connectV11,
    acceptAny,     regMr,       regMrDmaBuf, deregMr,          isend,       irecv,
    iflush,        test,        closeComm,   closeComm,        closeListen, getDeviceMr,
    irecvConsumed, makeVDevice, finalizeV11, setNetAttr};

__attribute__((visibility("default"))) ncclNet_v10_t ncclNetPlugin_v10 = {
    "Weft",        initV10,    devices,     getPropertiesV10, listen,      connectV10,
    acceptAny,     regMr,      regMrDmaBuf, deregMr,          isend,       irecv,
    iflush,        test,       closeComm,   closeComm,        closeListen, getDeviceMr,
    irecvConsumed, makeVDevice};

}  // extern "C"
