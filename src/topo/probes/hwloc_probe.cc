#include "src/topo/probes/hwloc_probe.h"

#include <hwloc.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace weft::topo::probe {
namespace {

struct TopologyHandle {
  hwloc_topology_t t = nullptr;
  ~TopologyHandle() {
    if (t) hwloc_topology_destroy(t);
  }
};

std::string busIdOf(const hwloc_obj_t o) {
  const hwloc_obj_attr_u::hwloc_pcidev_attr_s* p =
      o->type == HWLOC_OBJ_BRIDGE ? &o->attr->bridge.upstream.pci : &o->attr->pcidev;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", p->domain, p->bus, p->dev, p->func);
  return buf;
}

bool isPciFunction(const hwloc_obj_t o) {
  if (o->type == HWLOC_OBJ_PCI_DEVICE) return true;
  return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

std::string hex4(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%04x", v);
  return buf;
}

double gtPerSecond(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  return end == s.c_str() ? 0 : v;
}

// NCCL's rule: the slower of the device's and its upstream port's link, the narrower width.
void linkFromSysfs(const std::string& root, const std::string& busId, PciInfo* info) {
  std::string dev = root + "/bus/pci/devices/" + busId;
  char resolved[PATH_MAX];
  if (!realpath(dev.c_str(), resolved)) return;
  std::string path = resolved;
  std::string cls = readFirstLine(path + "/class");
  if (!cls.empty()) info->classCode = cls;
  std::string ds = readFirstLine(path + "/max_link_speed");
  std::string ps = readFirstLine(path + "/../max_link_speed");
  if (!ds.empty() || !ps.empty()) {
    if (ds.empty())
      info->linkSpeed = ps;
    else if (ps.empty())
      info->linkSpeed = ds;
    else
      info->linkSpeed = gtPerSecond(ps) < gtPerSecond(ds) ? ps : ds;
  }
  int dw = std::atoi(readFirstLine(path + "/max_link_width").c_str());
  int pw = std::atoi(readFirstLine(path + "/../max_link_width").c_str());
  if (dw > 0 && pw > 0)
    info->linkWidth = std::min(dw, pw);
  else
    info->linkWidth = std::max(dw, pw);
}

const char* cacheType(hwloc_obj_cache_type_t t) {
  switch (t) {
    case HWLOC_OBJ_CACHE_DATA:
      return "data";
    case HWLOC_OBJ_CACHE_INSTRUCTION:
      return "instruction";
    default:
      return "unified";
  }
}

}  // namespace

void cpuIdentity(std::string* arch, std::string* vendor, int* familyId, int* modelId) {
#if defined(__x86_64__)
  *arch = "x86_64";
#elif defined(__aarch64__)
  *arch = "arm64";
#elif defined(__PPC__) || defined(__powerpc64__)
  *arch = "ppc64";
#else
  *arch = "";
#endif
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
    char v[13];
    std::memcpy(v, &ebx, 4);
    std::memcpy(v + 4, &edx, 4);
    std::memcpy(v + 8, &ecx, 4);
    v[12] = '\0';
    *vendor = v;
  }
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    // NCCL's formula: family + extended family << 4, model + extended model << 4.
    *familyId = static_cast<int>(((eax >> 8) & 0xf) + (((eax >> 20) & 0xff) << 4));
    *modelId = static_cast<int>(((eax >> 4) & 0xf) + (((eax >> 16) & 0xf) << 4));
  }
#else
  (void)vendor;
  (void)familyId;
  (void)modelId;
#endif
}

bool probeHwloc(const HwlocOptions& options, HwlocResult* out, Report* report) {
  report->name = "hwloc";
  report->ran = true;
  TopologyHandle h;
  if (hwloc_topology_init(&h.t) != 0) {
    report->detail = "hwloc_topology_init failed";
    h.t = nullptr;
    return false;
  }
  if (!options.synthetic.empty()) {
    if (hwloc_topology_set_synthetic(h.t, options.synthetic.c_str()) != 0) {
      report->detail = "bad synthetic description '" + options.synthetic + "'";
      return false;
    }
  } else if (!options.xmlFile.empty()) {
    if (hwloc_topology_set_xml(h.t, options.xmlFile.c_str()) != 0) {
      report->detail = "cannot use hwloc XML " + options.xmlFile;
      return false;
    }
  }
  // Every PCI function and bridge, but no OS devices (block, net, ... names come from sysfs and
  // ibverbs): that halves the load time.
  hwloc_topology_set_io_types_filter(h.t, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(h.t, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(h.t) != 0) {
    report->detail = "hwloc_topology_load failed";
    return false;
  }
  hwloc_topology_t t = h.t;
  report->available = true;
  *out = HwlocResult{};
  HostInfo& host = out->host;
  host.packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  host.cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  host.pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  host.numaNodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  hwloc_obj_t root = hwloc_get_root_obj(t);
  host.memoryBytes = static_cast<int64_t>(root->total_memory);

  cpuIdentity(&out->arch, &out->vendor, &out->familyId, &out->modelId);
  if (hwloc_obj_t pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0)) {
    if (const char* m = hwloc_obj_get_info_by_name(pkg, "CPUModel")) host.cpuModel = m;
    if (const char* v = hwloc_obj_get_info_by_name(pkg, "CPUVendor")) out->vendor = v;
  }

  // Caches, grouped by (level, type, size).
  std::map<std::tuple<int, std::string, int64_t>, int> caches;
  const hwloc_obj_type_t cacheTypes[] = {HWLOC_OBJ_L1CACHE,  HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2CACHE,
                                         HWLOC_OBJ_L2ICACHE, HWLOC_OBJ_L3CACHE,  HWLOC_OBJ_L3ICACHE,
                                         HWLOC_OBJ_L4CACHE,  HWLOC_OBJ_L5CACHE};
  for (hwloc_obj_type_t ct : cacheTypes) {
    int n = hwloc_get_nbobjs_by_type(t, ct);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t c = hwloc_get_obj_by_type(t, ct, i);
      caches[{static_cast<int>(c->attr->cache.depth), cacheType(c->attr->cache.type),
              static_cast<int64_t>(c->attr->cache.size)}]++;
    }
  }
  for (const auto& [k, n] : caches)
    host.caches.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), n});

  int numas = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < numas; ++i) {
    hwloc_obj_t nn = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    NumaDomain d;
    d.os = static_cast<int>(nn->os_index);
    d.memoryBytes = static_cast<int64_t>(nn->attr->numanode.local_memory);
    if (nn->cpuset) {
      int pu = -1;
      hwloc_bitmap_foreach_begin(pu, nn->cpuset) { d.pus.push_back(pu); }
      hwloc_bitmap_foreach_end();
      d.cores = hwloc_get_nbobjs_inside_cpuset_by_type(t, nn->cpuset, HWLOC_OBJ_CORE);
    }
    out->numas.push_back(std::move(d));
  }

  std::vector<hwloc_obj_t> functions;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_bridge(t, o));)
    if (isPciFunction(o)) functions.push_back(o);
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(t, o));) functions.push_back(o);
  for (hwloc_obj_t o : functions) {
    PciFunction f;
    f.bridge = o->type == HWLOC_OBJ_BRIDGE;
    const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p =
        f.bridge ? o->attr->bridge.upstream.pci : o->attr->pcidev;
    f.info.busId = busIdOf(o);
    char cls[16];
    std::snprintf(cls, sizeof(cls), "0x%04x00", p.class_id);
    f.info.classCode = cls;
    f.info.vendor = hex4(p.vendor_id);
    f.info.device = hex4(p.device_id);
    f.info.subsystemVendor = hex4(p.subvendor_id);
    f.info.subsystemDevice = hex4(p.subdevice_id);
    if (options.synthetic.empty()) linkFromSysfs(options.sysfsRoot, f.info.busId, &f.info);
    for (hwloc_obj_t up = o->parent; up && up->type == HWLOC_OBJ_BRIDGE; up = up->parent) {
      if (up->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
        f.parentBusId = busIdOf(up);
        break;
      }
    }
    if (hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, o))
      if (anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1)
        f.numa = hwloc_bitmap_first(anc->nodeset);
    if (o->name)
      f.name = o->name;
    else if (const char* d = hwloc_obj_get_info_by_name(o, "PCIDevice"))
      f.name = d;
    if (!f.bridge)
      host.pciDevices.push_back(
          {f.info.busId, f.info.classCode, f.info.vendor, f.info.device, f.name, f.numa});
    out->pci.push_back(std::move(f));
  }
  std::sort(host.pciDevices.begin(), host.pciDevices.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.busId < b.busId; });
  report->detail = std::to_string(host.packages) + " package(s), " +
                   std::to_string(host.numaNodes) + " NUMA, " + std::to_string(host.cores) +
                   " cores, " + std::to_string(host.pus) + " PUs, " +
                   std::to_string(host.pciDevices.size()) + " PCI devices";
  return true;
}

}  // namespace weft::topo::probe
