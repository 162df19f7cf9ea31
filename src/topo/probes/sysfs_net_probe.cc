#include "src/topo/probes/sysfs_net_probe.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>

namespace weft::topo::probe {
namespace {

constexpr unsigned kIffUp = 0x1;
constexpr unsigned kIffLoopback = 0x8;
constexpr int kArphrdEther = 1;
constexpr int kArphrdInfiniband = 32;
constexpr int kArphrdLoopback = 772;

}  // namespace

bool probeSysfsNet(const std::string& sysfsRoot, std::vector<NetInterface>* out, Report* report) {
  report->name = "sysfs-net";
  report->ran = true;
  out->clear();
  std::string dir = sysfsRoot + "/class/net";
  DIR* d = opendir(dir.c_str());
  if (!d) {
    report->detail = "cannot read " + dir;
    return false;
  }
  report->available = true;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  int usable = 0;
  for (const std::string& name : names) {
    std::string base = dir + "/" + name;
    NetInterface i;
    i.name = name;
    unsigned flags =
        static_cast<unsigned>(std::strtoul(readFirstLine(base + "/flags").c_str(), nullptr, 16));
    int type = std::atoi(readFirstLine(base + "/type").c_str());
    i.up = (flags & kIffUp) != 0;
    i.loopback = (flags & kIffLoopback) != 0 || type == kArphrdLoopback;
    i.linkLayer = type == kArphrdInfiniband ? "IB" : type == kArphrdEther ? "Ethernet" : "other";
    i.mtu = std::atoi(readFirstLine(base + "/mtu").c_str());
    i.address = readFirstLine(base + "/address");
    i.operstate = readFirstLine(base + "/operstate");
    std::string speed = readFirstLine(base + "/speed");  // EINVAL (empty) when the link is down
    if (!speed.empty()) {
      long long s = std::strtoll(speed.c_str(), nullptr, 10);
      i.speedMbps = s > 0 ? s : -1;
    }
    char resolved[PATH_MAX];
    if (realpath((base + "/device").c_str(), resolved)) {
      std::string dev = resolved;
      i.busId = busIdFromDevicePath(dev);
      if (!i.busId.empty()) {
        // The PCI function itself may be a parent of `dev` (virtio: .../0000:00:03.0/virtio2).
        size_t at = dev.rfind(i.busId);
        std::string pci = at == std::string::npos ? dev : dev.substr(0, at + i.busId.size());
        i.classCode = readFirstLine(pci + "/class");
        std::string numa = readFirstLine(pci + "/numa_node");
        if (!numa.empty()) i.numa = std::atoi(numa.c_str());
      }
    }
    if (i.up && !i.loopback) ++usable;
    out->push_back(std::move(i));
  }
  report->detail = std::to_string(out->size()) + " interface(s), " + std::to_string(usable) +
                   " up and not loopback";
  return true;
}

}  // namespace weft::topo::probe
