// What a rank publishes for tcp in PeerInfo::netEndpoint: where it listens (a sockaddr_in or
// sockaddr_in6), how many sockets it opens per connection, and the token a connecting peer must
// present (random per rank and communicator).
#pragma once
#include <cstdint>
#include <cstring>

#include "transports/base/transport.h"
#include "transports/tcp/wire.h"

namespace weft::tcp {

struct Published {
  uint8_t addr[28];
  uint32_t addrLen;
  uint32_t sockets;
  uint8_t token[kTokenBytes];
};
static_assert(sizeof(Published) <= sizeof(transport::PeerInfo::netEndpoint),
              "fits the PeerInfo blob");

// What `p` published for tcp; addrLen 0 where it published nothing.
inline Published publishedBy(const transport::PeerInfo& p) {
  Published e{};
  if (p.netEndpointBytes == sizeof(Published)) std::memcpy(&e, p.netEndpoint, sizeof(e));
  return e;
}

inline void publishInto(transport::PeerInfo* p, const Published& e) {
  std::memcpy(p->netEndpoint, &e, sizeof(e));
  p->netEndpointBytes = sizeof(e);
}

}  // namespace weft::tcp
