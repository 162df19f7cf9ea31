// Choosing the address the bootstrap root listens on: NCCL_SOCKET_IFNAME if set, else the first
// usable interface, else loopback.
#pragma once
#include <string>
#include <vector>

#include "src/bootstrap/socket.h"

namespace weft::bootstrap {

struct Interface {
  std::string name;
  SocketAddress address;  // port 0
  bool loopback = false;
};

// The UP interfaces of this host with their IPv4/IPv6 addresses, in getifaddrs order.
std::vector<Interface> listInterfaces();

// NCCL_SOCKET_IFNAME syntax: a comma list of name prefixes ("eth,ib"); a leading '^' turns it
// into an exclude list; a leading '=' (after any '^') makes the names exact instead of prefixes.
class InterfaceFilter {
 public:
  explicit InterfaceFilter(const std::string& spec);
  bool matches(const std::string& name) const;

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

// With an empty spec: the first non-loopback, non-docker interface with an IPv4 address, else a
// loopback IPv4 address, else 127.0.0.1. With a spec: the first matching interface with an IPv4
// address, else one with an IPv6 address (global before link-local); throws
// Error(kInvalidArgument) when nothing matches. The result has port 0.
SocketAddress pickAddress(const std::vector<Interface>& interfaces, const std::string& spec);

// pickAddress(listInterfaces(), ifname), ifname as NCCL_SOCKET_IFNAME gives it.
SocketAddress chooseListenAddress(const std::string& ifname);

}  // namespace weft::bootstrap
