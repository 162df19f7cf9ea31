// The control connection of a transport that sets up over a peer's tcp endpoint (ib, a network
// plugin): the connecting side opens a socket to the endpoint and sends the hello that names the
// communicator, the ranks and the channel; the endpoint hands the accepted socket to the
// transport that claimed (peer, channel) there. Afterwards the socket carries the transport's own
// setup message and single control bytes.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/bootstrap/socket.h"

namespace weft::tcp {

// Who a control connection joins, as its hello names it: what the transports that set up over a
// tcp endpoint (ib::ConnectionParams, netplugin::PluginConnectionParams) start their
// parameters with.
struct ControlParams {
  uint64_t commHash = 0;
  int rank = 0;
  int peer = 0;
  int channel = 0;
  uint32_t slots = 4;
  size_t slotBytes = 0;
};

// Connects to `address` (the connect bounded by `timeout`), makes the socket non-blocking and
// tracked (closed in a forked child) and sends the hello of `params` with the peer endpoint's
// `token` (kTokenBytes) within `timeout`. Returns the socket,
// with *helloSent false where the hello could not be sent (the caller fails its connection);
// throws weft::Error naming `who` (e.g. "ib: control connection to rank 3 (...)") where the
// socket cannot be made or connected.
int openControlSocket(const bootstrap::SocketAddress& address, const ControlParams& params,
                      const uint8_t* token, std::chrono::milliseconds timeout,
                      const std::string& who, bool* helloSent);

// Writes all of `bytes` to a non-blocking socket within `timeout`; false on error or timeout.
bool writeAllWithin(int fd, const void* data, size_t bytes, std::chrono::milliseconds timeout);

}  // namespace weft::tcp
