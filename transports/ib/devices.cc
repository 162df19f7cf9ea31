#include "transports/ib/devices.h"

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

namespace weft::ib {
namespace {

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::vector<GidEntry> gidTable(const std::string& device, int port, int length) {
  std::vector<GidEntry> table;
  const std::string base = "/sys/class/infiniband/" + device + "/ports/" + std::to_string(port);
  for (int i = 0; i < length; ++i) {
    GidEntry e;
    e.index = i;
    e.gid = readLine(base + "/gids/" + std::to_string(i));
    e.type = readLine(base + "/gid_attrs/types/" + std::to_string(i));
    table.push_back(e);
  }
  return table;
}

// Device contexts and protection domains stay open for the life of the process: connections of
// every communicator share them, and closing one under a live queue pair is undefined.
struct OpenDevice {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
};

std::mutex& tableMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, OpenDevice>& openDevices() {
  static std::map<std::string, OpenDevice> table;
  return table;
}

}  // namespace

HcaFilter parseHcaFilter(const std::string& spec) {
  HcaFilter f;
  size_t at = 0;
  if (at < spec.size() && spec[at] == '^') f.exclude = true, ++at;
  if (at < spec.size() && spec[at] == '=') f.exact = true, ++at;
  std::stringstream list(spec.substr(at));
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item.empty()) continue;
    HcaFilter::Entry e;
    size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      try {
        e.port = std::stoi(item.substr(colon + 1));
      } catch (const std::exception&) {
        e.port = -1;
      }
    }
    if (!e.name.empty()) f.entries.push_back(e);
  }
  return f;
}

bool hcaAllowed(const HcaFilter& f, const std::string& device, int port) {
  if (f.entries.empty()) return true;
  bool listed = false;
  for (const auto& e : f.entries) {
    bool nameMatches = f.exact ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (nameMatches && (e.port < 0 || e.port == port)) listed = true;
  }
  return listed != f.exclude;
}

int chooseGid(const std::vector<GidEntry>& table) {
  const std::string zero = "0000:0000:0000:0000:0000:0000:0000:0000";
  auto usable = [&](const GidEntry& e) { return !e.gid.empty() && e.gid != zero; };
  for (const auto& e : table)
    if (usable(e) && e.type == "RoCE v2" && e.gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0)
      return e.index;
  for (const auto& e : table)
    if (usable(e) && e.type == "RoCE v2") return e.index;
  for (const auto& e : table)
    if (usable(e)) return e.index;
  return -1;
}

bool openPort(const std::string& hcaSpec, int gidIndex, Port* out, std::string* why) {
  const Verbs* v = verbs(why);
  if (!v) return false;
  const HcaFilter filter = parseHcaFilter(hcaSpec);
  std::lock_guard<std::mutex> lock(tableMutex());
  int n = 0;
  ibv_device** list = v->getDeviceList(&n);
  if (!list || n == 0) {
    if (list) v->freeDeviceList(list);
    *why = "no RDMA device";
    return false;
  }
  std::string seen;
  bool found = false;
  for (int d = 0; d < n && !found; ++d) {
    const std::string name = v->getDeviceName(list[d]);
    OpenDevice& dev = openDevices()[name];
    if (!dev.context) {
      dev.context = v->openDevice(list[d]);
      if (!dev.context) continue;
      dev.pd = v->allocPd(dev.context);
      if (!dev.pd) {
        v->closeDevice(dev.context);
        dev.context = nullptr;
        continue;
      }
    }
    ibv_device_attr attr{};
    if (v->queryDevice(dev.context, &attr) != 0) continue;
    for (int p = 1; p <= attr.phys_port_cnt && !found; ++p) {
      ibv_port_attr pa{};
      if (v->queryPort(dev.context, static_cast<uint8_t>(p), &pa) != 0) continue;
      seen += " " + name + ":" + std::to_string(p) + (pa.state == IBV_PORT_ACTIVE ? "" : "(down)");
      if (pa.state != IBV_PORT_ACTIVE || !hcaAllowed(filter, name, p)) continue;
      Port port;
      port.device = name;
      port.port = p;
      port.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      port.lid = pa.lid;
      port.mtu = pa.active_mtu;
      port.context = dev.context;
      port.pd = dev.pd;
      port.gidIndex = gidIndex >= 0
                          ? gidIndex
                          : (port.ethernet ? chooseGid(gidTable(name, p, pa.gid_tbl_len)) : 0);
      if (port.gidIndex < 0 ||
          v->queryGid(dev.context, static_cast<uint8_t>(p), port.gidIndex, &port.gid) != 0)
        continue;
      *out = port;
      found = true;
    }
  }
  v->freeDeviceList(list);
  if (!found)
    *why = "no active port allowed by NCCL_IB_HCA='" + hcaSpec +
           "' among:" + (seen.empty() ? std::string(" none") : seen);
  return found;
}

}  // namespace weft::ib
