#include "src/bootstrap/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>

#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::bootstrap {
namespace {

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool isLinkLocal(const SocketAddress& a) {
  if (a.family() != AF_INET6) return false;
  return IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(a.get())->sin6_addr);
}

SocketAddress loopbackV4() {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return SocketAddress(reinterpret_cast<sockaddr*>(&sin), sizeof(sin));
}

}  // namespace

std::vector<Interface> listInterfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    fail(Status::kSystemError, sysError("bootstrap: getifaddrs", errno));
  std::vector<Interface> out;
  for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    Interface i;
    i.name = ifa->ifa_name;
    i.address = SocketAddress(ifa->ifa_addr,
                              family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    i.address.setPort(0);
    i.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(std::move(i));
  }
  ::freeifaddrs(list);
  return out;
}

InterfaceFilter::InterfaceFilter(const std::string& spec) {
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') exclude_ = true, ++pos;
  if (pos < spec.size() && spec[pos] == '=') exact_ = true, ++pos;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) names_.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

bool InterfaceFilter::matches(const std::string& name) const {
  bool listed = false;
  for (const auto& n : names_)
    if (exact_ ? name == n : startsWith(name, n)) listed = true;
  return exclude_ ? !listed : listed;
}

SocketAddress pickAddress(const std::vector<Interface>& interfaces, const std::string& spec) {
  if (spec.empty()) {
    for (const auto& i : interfaces)
      if (!i.loopback && !startsWith(i.name, "docker") && i.address.family() == AF_INET)
        return i.address;
    for (const auto& i : interfaces)
      if (i.loopback && i.address.family() == AF_INET) return i.address;
    return loopbackV4();
  }
  InterfaceFilter filter(spec);
  const Interface* v6 = nullptr;
  for (const auto& i : interfaces) {
    if (!filter.matches(i.name)) continue;
    if (i.address.family() == AF_INET) return i.address;
    if (!v6 || (isLinkLocal(v6->address) && !isLinkLocal(i.address))) v6 = &i;
  }
  if (v6) return v6->address;
  std::vector<std::string> names;
  for (const auto& i : interfaces)
    if (std::find(names.begin(), names.end(), i.name) == names.end()) names.push_back(i.name);
  std::string have;
  for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
  fail(Status::kInvalidArgument, "bootstrap: NCCL_SOCKET_IFNAME=" + spec +
                                     " matches no UP interface with an address (have: " + have +
                                     ")");
}

SocketAddress chooseListenAddress(const std::string& spec) {
  SocketAddress a = pickAddress(listInterfaces(), spec);
  WEFT_INFO(BOOTSTRAP, "bootstrap: using %s%s%s", a.toString().c_str(),
            spec.empty() ? "" : " for NCCL_SOCKET_IFNAME=", spec.c_str());
  return a;
}

}  // namespace weft::bootstrap
