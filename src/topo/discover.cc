#include "src/topo/discover.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "src/common/error.h"
#include "src/common/host_id.h"
#include "src/common/log.h"
#include "src/topo/probes/cuda_probe.h"
#include "src/topo/probes/hwloc_probe.h"
#include "src/topo/probes/ibverbs_probe.h"
#include "src/topo/probes/nvml_probe.h"
#include "src/topo/probes/sysfs_net_probe.h"
#include "src/topo/xml_reader.h"
#include "src/topo/xml_writer.h"

namespace weft::topo {

ProbeSelection parseProbeSelection(const std::string& raw) {
  std::string spec;
  for (char c : raw)
    if (c != ' ') spec += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (spec.empty() || spec == "all") return ProbeSelection{};
  ProbeSelection none{false, false, false, false, false};
  if (spec == "none") return none;
  bool exclude = spec[0] == '^';
  ProbeSelection s = exclude ? ProbeSelection{} : none;
  std::stringstream in(exclude ? spec.substr(1) : spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    bool* flag = item == "hwloc"                     ? &s.hwloc
                 : item == "sysfs" || item == "net"  ? &s.sysfsNet
                 : item == "ibverbs" || item == "ib" ? &s.ibverbs
                 : item == "nvml"                    ? &s.nvml
                 : item == "cuda"                    ? &s.cuda
                                                     : nullptr;
    if (!flag)
      fail(Status::kInvalidArgument, "WEFT_TOPO_PROBES: unknown probe '" + item +
                                         "' (known: hwloc, sysfs, ibverbs, nvml, cuda)");
    *flag = !exclude;
  }
  return s;
}

ProbeResults runProbes(const DiscoverOptions& o) {
  ProbeResults r;
  auto skipped = [&](const char* name) {
    probe::Report rep;
    rep.name = name;
    rep.detail = "disabled by WEFT_TOPO_PROBES";
    r.reports.push_back(rep);
  };
  probe::Report rep;
  if (o.probes.hwloc) {
    probe::HwlocOptions ho;
    ho.synthetic = o.hwlocSynthetic;
    ho.sysfsRoot = o.sysfsRoot;
    r.haveHwloc = probe::probeHwloc(ho, &r.hwloc, &rep);
    r.reports.push_back(rep);
  } else {
    skipped("hwloc");
  }
  if (o.probes.sysfsNet) {
    rep = {};
    r.haveNet = probe::probeSysfsNet(o.sysfsRoot, &r.interfaces, &rep);
    r.reports.push_back(rep);
  } else {
    skipped("sysfs-net");
  }
  if (o.probes.ibverbs) {
    rep = {};
    r.haveIb = probe::probeIbverbs(o.sysfsRoot, &r.ib, &rep);
    r.reports.push_back(rep);
  } else {
    skipped("ibverbs");
  }
  if (o.probes.nvml) {
    rep = {};
    r.haveNvml = probe::probeNvml(&r.nvml, &rep);
    r.reports.push_back(rep);
  } else {
    skipped("nvml");
  }
  if (o.probes.cuda && r.nvml.empty()) {
    rep = {};
    r.haveCuda = probe::probeCuda(&r.cuda, &rep);
    r.reports.push_back(rep);
  } else {
    probe::Report c;
    c.name = "cuda";
    c.detail = o.probes.cuda ? "not needed (NVML listed the GPUs)" : "disabled by WEFT_TOPO_PROBES";
    r.reports.push_back(c);
  }
  for (const auto& p : r.reports)
    if (p.ran && !p.available)
      WEFT_INFO(INIT, "topology probe %s: %s", p.name.c_str(), p.detail.c_str());
  return r;
}

std::string probeSummary(const std::vector<probe::Report>& reports) {
  std::string s;
  for (const auto& p : reports) {
    if (!s.empty()) s += "; ";
    s += p.name + ": ";
    if (!p.ran)
      s += "off";
    else if (!p.available)
      s += "not available";
    if (!p.detail.empty())
      s += (p.ran && p.available ? "" : " (") + p.detail + (p.ran && p.available ? "" : ")");
  }
  return s;
}

namespace {

bool looksLikeGpu(const std::string& cls, const std::string& vendor) {
  // 3D controllers, and NVIDIA display controllers; never a BMC's VGA.
  std::string c = cls.substr(0, std::min<size_t>(cls.size(), 6));
  return c == "0x0302" || (isGpuClass(cls) && vendor == "0x10de");
}

std::vector<probe::NumaDomain> sysfsNumas(const std::string& root) {
  std::vector<probe::NumaDomain> out;
  std::string dir = root + "/devices/system/node";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("node", 0) != 0 || n.size() < 5 ||
          !std::isdigit(static_cast<unsigned char>(n[4])))
        continue;
      probe::NumaDomain nd;
      nd.os = std::atoi(n.c_str() + 4);
      nd.pus = probe::parseCpuMask(probe::readFirstLine(dir + "/" + n + "/cpumap"));
      out.push_back(nd);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.os < b.os; });
  return out;
}

class Builder {
 public:
  Builder(const ProbeResults& r, const DiscoverOptions& o) : r_(r), o_(o), t_(o.rates) {}

  Topology build() {
    HostInfo info = r_.haveHwloc ? r_.hwloc.host : HostInfo{};
    info.hostHash = o_.hostHash ? o_.hostHash : weft::hostHash(o_.hostId);
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    info.hostname = name;
    if (!r_.haveHwloc) info.pus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    host_ = t_.addHost(info);
    addCpus();
    for (const auto& f : r_.hwloc.pci) functions_[normalizeBusId(f.info.busId)] = &f;
    if (r_.haveHwloc)
      for (const auto& f : r_.hwloc.pci) {
        if (f.bridge) continue;
        if (looksLikeGpu(f.info.classCode, f.info.vendor))
          pciNode(f.info.busId, NodeKind::kGpu, -1, "");
        else if (isNicClass(f.info.classCode))
          pciNode(f.info.busId, NodeKind::kNic, -1, "");
      }
    addInterfaces();
    addIb();
    addGpus();
    numberNets();
    t_.finalize();
    return std::move(t_);
  }

 private:
  void addCpus() {
    std::vector<probe::NumaDomain> numas = r_.haveHwloc ? r_.hwloc.numas : sysfsNumas(o_.sysfsRoot);
    if (numas.empty()) {
      probe::NumaDomain d;
      d.os = 0;
      long n = sysconf(_SC_NPROCESSORS_ONLN);
      for (long i = 0; i < n; ++i) d.pus.push_back(static_cast<int>(i));
      numas.push_back(d);
    }
    std::string arch, vendor;
    int family = -1, model = -1;
    if (r_.haveHwloc) {
      arch = r_.hwloc.arch, vendor = r_.hwloc.vendor;
      family = r_.hwloc.familyId, model = r_.hwloc.modelId;
    } else {
      probe::cpuIdentity(&arch, &vendor, &family, &model);
    }
    for (const auto& d : numas) {
      Node n;
      n.kind = NodeKind::kCpu;
      n.host = host_;
      n.parent = t_.hostNode(host_);
      n.cpu.numaId = d.os;
      n.cpu.affinity = probe::cpuMaskText(d.pus);
      n.cpu.arch = arch;
      n.cpu.vendor = vendor;
      n.cpu.familyId = family;
      n.cpu.modelId = model;
      n.cpu.cores = d.cores;
      n.cpu.pus = static_cast<int>(d.pus.size());
      cpus_[d.os] = t_.addNode(std::move(n));
    }
  }

  int cpuFor(int numa) const {
    auto it = cpus_.find(numa);
    return it != cpus_.end() ? it->second : cpus_.begin()->second;
  }

  int sysfsNuma(const std::string& busId) const {
    std::string v = probe::readFirstLine(o_.sysfsRoot + "/bus/pci/devices/" + busId + "/numa_node");
    return v.empty() ? -1 : std::atoi(v.c_str());
  }

  // The node of a PCI function (and of the bridges above it), made on first use.
  int pciNode(const std::string& rawBusId, NodeKind kind, int numaHint, const std::string& cls,
              int depth = 0) {
    std::string busId = normalizeBusId(rawBusId);
    auto done = nodes_.find(busId);
    if (done != nodes_.end()) return done->second;
    Node n;
    n.host = host_;
    n.kind = kind;
    auto f = functions_.find(busId);
    int parent;
    if (f != functions_.end()) {
      n.pci = f->second->info;
      parent = f->second->parentBusId.empty() || depth > 64
                   ? cpuFor(f->second->numa >= 0 ? f->second->numa : sysfsNuma(busId))
                   : pciNode(f->second->parentBusId, NodeKind::kPciSwitch, -1, "", depth + 1);
    } else {
      n.pci.busId = busId;
      n.pci.classCode =
          !cls.empty()
              ? cls
              : probe::readFirstLine(o_.sysfsRoot + "/bus/pci/devices/" + busId + "/class");
      if (n.pci.classCode.empty())
        n.pci.classCode = kind == NodeKind::kGpu   ? "0x030200"
                          : kind == NodeKind::kNic ? "0x020000"
                                                   : "0x060400";
      parent = cpuFor(numaHint >= 0 ? numaHint : sysfsNuma(busId));
    }
    double bw = pcieBandwidth(n.pci.linkSpeed, n.pci.linkWidth);
    n.parent = parent;
    int idx = t_.addChildNode(std::move(n), LinkKind::kPci, bw, kPciLatencyUs);
    nodes_[busId] = idx;
    return idx;
  }

  int virtualNic() {
    if (virtualNic_ >= 0) return virtualNic_;
    int cpu = cpus_.begin()->second;
    Node n;
    n.kind = NodeKind::kNic;
    n.host = host_;
    n.parent = cpu;
    virtualNic_ = t_.addChildNode(std::move(n), LinkKind::kPci, kLocalBw);
    return virtualNic_;
  }

  int addNet(int nic, Node n) {
    n.kind = NodeKind::kNet;
    n.host = host_;
    n.parent = nic;
    double bw = netBandwidth(n.net.speedMbps);
    return t_.addChildNode(std::move(n), LinkKind::kNet, bw);
  }

  void addInterfaces() {
    for (const auto& i : r_.interfaces) {
      if (!i.up || i.loopback) continue;
      int nic =
          i.busId.empty() ? virtualNic() : pciNode(i.busId, NodeKind::kNic, i.numa, i.classCode);
      Node n;
      n.net.name = i.name;
      n.net.speedMbps = i.speedMbps;
      n.net.linkLayer = i.linkLayer == "other" ? "" : i.linkLayer;
      addNet(nic, std::move(n));
    }
  }

  void addIb() {
    for (const auto& d : r_.ib) {
      if (d.busId.empty()) continue;
      int nic = pciNode(d.busId, NodeKind::kNic, d.numa, d.classCode);
      for (const auto& p : d.ports) {
        if (p.state != 4) continue;  // IBV_PORT_ACTIVE, as NCCL
        Node n;
        n.net.name = d.name;
        n.net.port = p.port;
        n.net.speedMbps = p.speedMbps;
        n.net.guid = d.guid;
        n.net.linkLayer = p.linkLayer;
        n.net.gid = p.gid;
        addNet(nic, std::move(n));
      }
    }
  }

  void addGpus() {
    for (const auto& g : r_.nvml) {
      if (g.busId.empty()) continue;
      Node& n = t_.mutableNode(pciNode(g.busId, NodeKind::kGpu, -1, ""));
      n.gpu.dev = g.index;
      n.gpu.sm = g.sm;
      n.gpu.name = g.name;
    }
    for (const auto& g : r_.cuda) {
      if (g.busId.empty()) continue;
      Node& n = t_.mutableNode(pciNode(g.busId, NodeKind::kGpu, -1, ""));
      if (n.gpu.dev < 0) n.gpu.dev = g.ordinal;
      if (n.gpu.sm < 0) n.gpu.sm = g.sm;
      if (n.gpu.name.empty()) n.gpu.name = g.name;
    }
    // GPUs no driver described: numbered after the others in bus-id order, like a partial file.
    std::set<int> used;
    std::vector<int> unnamed;
    for (int g : t_.find(NodeKind::kGpu, host_)) {
      if (t_.node(g).gpu.dev >= 0)
        used.insert(t_.node(g).gpu.dev);
      else
        unnamed.push_back(g);
    }
    std::sort(unnamed.begin(), unnamed.end(),
              [&](int a, int b) { return t_.node(a).pci.busId < t_.node(b).pci.busId; });
    int next = 0;
    for (int g : unnamed) {
      while (used.count(next)) ++next;
      t_.mutableNode(g).gpu.dev = next++;
    }
    addNvLinks(&t_, host_, r_.nvml);
  }

  void numberNets() {
    std::vector<int> nets = t_.find(NodeKind::kNet, host_);
    std::stable_sort(nets.begin(), nets.end(), [&](int a, int b) {
      return (t_.node(a).net.linkLayer == "IB" || t_.node(a).net.port > 0) >
             (t_.node(b).net.linkLayer == "IB" || t_.node(b).net.port > 0);
    });
    int dev = 0;
    for (int n : nets) t_.mutableNode(n).net.dev = dev++;
  }

 public:
  // NVLinks from NVML: one link per GPU pair (count = lanes), GPU -> NVSwitch links aggregated per
  // switch chip, links to a CPU (POWER) on the local CPU.
  static void addNvLinks(Topology* t, int host, const std::vector<probe::NvmlGpu>& gpus) {
    const LinkRates& r = t->rates();
    for (const auto& g : gpus) {
      int a = t->findBusId(host, g.busId);
      if (a < 0 || t->node(a).kind != NodeKind::kGpu) continue;
      std::map<std::string, std::pair<int, int>> byRemote;  // bus id -> (count, type)
      for (const auto& l : g.nvlinks) {
        auto& e = byRemote[l.remoteBusId];
        e.first++;
        e.second = l.remoteType;
      }
      for (const auto& [remote, ct] : byRemote) {
        int b = t->findBusId(host, remote);
        bool peerGpu = b >= 0 && t->node(b).kind == NodeKind::kGpu && ct.second != 2;
        if (peerGpu) {
          if (t->findLink(a, b, LinkKind::kNvLink) >= 0) continue;  // the peer declared it
          Link l;
          l.a = a;
          l.b = b;
          l.kind = LinkKind::kNvLink;
          l.count = ct.first;
          l.bw = ct.first *
                 std::min(r.nvlinkPerLink(t->node(a).gpu.sm), r.nvlinkPerLink(t->node(b).gpu.sm));
          l.latencyUs = kNvLinkLatencyUs;
          t->addLink(std::move(l));
          continue;
        }
        int target = -1;
        std::string tclass = "0x068000";
        if (ct.second == 1) {
          tclass = "0x068001";
          for (int n = a; n >= 0; n = t->node(n).parent)
            if (t->node(n).kind == NodeKind::kCpu) target = n;
          if (target < 0) continue;
        } else {
          target = t->findNvSwitch(host);
          if (target < 0) {
            Node sw;
            sw.kind = NodeKind::kNvSwitch;
            sw.host = host;
            target = t->addNode(std::move(sw));
          }
        }
        int li = t->findLink(a, target, LinkKind::kNvLink);
        if (li < 0) {
          Link l;
          l.a = a;
          l.b = target;
          l.kind = LinkKind::kNvLink;
          l.latencyUs = kNvLinkLatencyUs;
          li = t->addLink(std::move(l));
        }
        Link& l = t->mutableLink(li);
        l.count += ct.first;
        l.bw += ct.first * r.nvlinkPerLink(t->node(a).gpu.sm);
        l.parts.push_back({remote, tclass, ct.first});
      }
    }
  }

 private:
  const ProbeResults& r_;
  const DiscoverOptions& o_;
  Topology t_;
  int host_ = 0;
  int virtualNic_ = -1;
  std::map<int, int> cpus_;
  std::map<std::string, const probe::PciFunction*> functions_;
  std::map<std::string, int> nodes_;
};

}  // namespace

Topology buildHostTopology(const ProbeResults& results, const DiscoverOptions& options) {
  return Builder(results, options).build();
}

void completeFromProbes(Topology* t, int host, const ProbeResults& r) {
  std::vector<probe::NvmlGpu> needLinks;
  for (const auto& g : r.nvml) {
    int n = t->findBusId(host, g.busId);
    if (n < 0 || t->node(n).kind != NodeKind::kGpu) continue;
    Node& node = t->mutableNode(n);
    if (node.completed || node.gpu.dev < 0) node.gpu.dev = g.index;
    if (node.gpu.sm < 0) node.gpu.sm = g.sm;
    if (node.gpu.name.empty()) node.gpu.name = g.name;
    bool hasNvLink = false;
    for (int l : t->linksAt(n)) hasNvLink |= t->link(l).kind == LinkKind::kNvLink;
    if (!hasNvLink) needLinks.push_back(g);
  }
  for (const auto& g : r.cuda) {
    int n = t->findBusId(host, g.busId);
    if (n < 0 || t->node(n).kind != NodeKind::kGpu) continue;
    Node& node = t->mutableNode(n);
    if (node.gpu.sm < 0) node.gpu.sm = g.sm;
    if (node.gpu.name.empty()) node.gpu.name = g.name;
  }
  Builder::addNvLinks(t, host, needLinks);
  // Made-up ports of NICs the file names by bus id take the live port's facts.
  auto fill = [&](const std::string& busId, const std::string& name, int64_t speed, int port,
                  const std::string& layer, const std::string& guid) {
    int nic = t->findBusId(host, busId);
    if (nic < 0 || t->node(nic).kind != NodeKind::kNic) return;
    for (int c : t->children(nic)) {
      Node& net = t->mutableNode(c);
      if (net.kind != NodeKind::kNet || !net.completed || !net.net.name.empty()) continue;
      net.net.name = name;
      net.net.speedMbps = speed;
      if (port > 0) net.net.port = port;
      if (!layer.empty()) net.net.linkLayer = layer;
      net.net.guid = guid;
      for (int l : t->linksAt(c))
        if (t->link(l).kind == LinkKind::kNet) t->mutableLink(l).bw = netBandwidth(speed);
      return;
    }
  };
  for (const auto& d : r.ib)
    for (const auto& p : d.ports)
      if (p.state == 4) fill(d.busId, d.name, p.speedMbps, p.port, p.linkLayer, d.guid);
  for (const auto& i : r.interfaces)
    if (i.up && !i.loopback && !i.busId.empty())
      fill(i.busId, i.name, i.speedMbps, -1, i.linkLayer == "other" ? "" : i.linkLayer, "");
  t->finalize();
}

Discovery discoverHost(const DiscoverOptions& options) {
  Discovery d;
  ProbeResults r = runProbes(options);
  d.reports = r.reports;
  d.topology = std::make_shared<const Topology>(buildHostTopology(r, options));
  d.source = "probe";
  d.xml = writeTopologyXml(*d.topology);
  return d;
}

int currentNumaNode(const Topology& t, int host) {
  int cpu = sched_getcpu();
  if (cpu < 0) return -1;
  for (int c : t.find(NodeKind::kCpu, host)) {
    std::vector<int> set = probe::parseCpuMask(t.node(c).cpu.affinity);
    if (std::find(set.begin(), set.end(), cpu) != set.end()) return t.node(c).cpu.numaId;
  }
  return -1;
}

namespace {

std::mutex gMu;
int gProbeRuns = 0;
std::map<std::string, std::shared_ptr<const ProbeResults>> gProbes;
std::map<std::string, std::shared_ptr<const Discovery>> gDiscoveries;

std::shared_ptr<const ProbeResults> cachedProbes(const DiscoverOptions& o, const std::string& key) {
  auto it = gProbes.find(key);
  if (it != gProbes.end()) return it->second;
  auto r = std::make_shared<const ProbeResults>(runProbes(o));
  ++gProbeRuns;
  gProbes[key] = r;
  return r;
}

}  // namespace

int localProbeRuns() {
  std::lock_guard<std::mutex> lock(gMu);
  return gProbeRuns;
}

std::shared_ptr<const Discovery> localDiscovery(const Tuning& tuning) {
  std::string file = tuning.topoFile;
  const std::string& probes = tuning.topoProbes;
  const std::string& rates = tuning.topoRates;
  std::string key = file + "\n" + probes + "\n" + rates;
  std::lock_guard<std::mutex> lock(gMu);
  auto it = gDiscoveries.find(key);
  if (it != gDiscoveries.end()) return it->second;

  DiscoverOptions o;
  o.probes = parseProbeSelection(probes);
  o.rates = LinkRates::byName(rates);
  o.hostId = tuning.hostId;
  auto results = cachedProbes(o, probes + "\n" + rates);
  auto d = std::make_shared<Discovery>();
  d->reports = results->reports;
  std::shared_ptr<Topology> topo;
  if (!file.empty() && access(file.c_str(), R_OK) != 0) {
    WEFT_WARN(INIT, "NCCL_TOPO_FILE=%s cannot be read; discovering the topology instead",
              file.c_str());
    file.clear();
  }
  if (!file.empty()) {
    XmlReadOptions ro;
    ro.rates = o.rates;
    Topology loaded = readTopologyFile(file, ro);
    // A multi-host file: keep this host's part (by host hash), else the first host.
    uint64_t me = weft::hostHash(tuning.hostId);
    int pick = 0;
    for (int h = 0; h < loaded.hostCount(); ++h)
      if (loaded.host(h).hostHash == me) pick = h;
    topo = std::make_shared<Topology>(o.rates);
    topo->appendHost(loaded, pick);
    topo->finalize();
    completeFromProbes(topo.get(), 0, *results);
    d->source = "NCCL_TOPO_FILE=" + file;
  } else {
    topo = std::make_shared<Topology>(buildHostTopology(*results, o));
    d->source = "probe";
  }
  d->topology = topo;
  d->xml = writeTopologyXml(*topo);
  gDiscoveries[key] = d;
  return d;
}

}  // namespace weft::topo
