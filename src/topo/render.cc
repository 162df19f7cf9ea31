#include "src/topo/render.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace weft::topo {

std::string formatBandwidth(double bw) {
  char buf[32];
  if (bw >= 100 || bw == static_cast<long long>(bw))
    std::snprintf(buf, sizeof(buf), "%.0f GB/s", bw);
  else
    std::snprintf(buf, sizeof(buf), "%.3g GB/s", bw);
  return buf;
}

std::string formatBytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  if (v == static_cast<long long>(v))
    std::snprintf(buf, sizeof(buf), "%.0f %s", v, units[u]);
  else
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

static std::string speedText(int64_t mbps) {
  if (mbps <= 0) return "speed unknown";
  char buf[32];
  if (mbps % 1000 == 0)
    std::snprintf(buf, sizeof(buf), "%lld Gb/s", static_cast<long long>(mbps / 1000));
  else
    std::snprintf(buf, sizeof(buf), "%lld Mb/s", static_cast<long long>(mbps));
  return buf;
}

std::string describeHost(const Topology& t, int h) {
  const HostInfo& info = t.host(h);
  std::ostringstream o;
  if (!info.hostname.empty()) o << info.hostname << ":";
  std::vector<std::string> parts;
  if (info.packages) parts.push_back(std::to_string(info.packages) + " package(s)");
  if (info.cores) parts.push_back(std::to_string(info.cores) + " cores");
  if (info.pus) parts.push_back(std::to_string(info.pus) + " PUs");
  parts.push_back(std::to_string(t.count(NodeKind::kCpu, h)) + " NUMA");
  if (info.memoryBytes) parts.push_back(formatBytes(info.memoryBytes));
  for (size_t i = 0; i < parts.size(); ++i)
    o << (i ? ", " : info.hostname.empty() ? "" : " ") << parts[i];

  std::vector<int> gpus = t.find(NodeKind::kGpu, h);
  o << "; " << gpus.size() << " GPU(s)";
  if (!gpus.empty()) {
    std::map<int, int> sms;
    int nvl = 0;
    for (int g : gpus) {
      sms[t.node(g).gpu.sm]++;
      for (int l : t.linksAt(g))
        if (t.link(l).kind == LinkKind::kNvLink && t.link(l).a != t.link(l).b)
          nvl += t.link(l).count;
    }
    o << " (";
    bool first = true;
    for (const auto& [sm, n] : sms) {
      o << (first ? "" : ", ") << (sm < 0 ? std::string("sm?") : "sm" + std::to_string(sm));
      first = false;
    }
    if (t.findNvSwitch(h) >= 0) {
      o << ", NVSwitch";
    }
    if (nvl) o << ", " << nvl << " NVLink lane ends";
    o << ")";
  }
  std::vector<int> nets = t.find(NodeKind::kNet, h);
  o << "; " << t.count(NodeKind::kNic, h) << " NIC(s)";
  if (!nets.empty()) {
    o << " (";
    for (size_t i = 0; i < nets.size() && i < 4; ++i) {
      const NetInfo& n = t.node(nets[i]).net;
      o << (i ? ", " : "") << (n.name.empty() ? "net" + std::to_string(n.dev) : n.name) << " "
        << (n.linkLayer.empty() ? "" : n.linkLayer + " ") << speedText(n.speedMbps);
    }
    if (nets.size() > 4) o << ", +" << nets.size() - 4 << " more";
    o << ")";
  }
  return o.str();
}

namespace {

std::string nodeLine(const Topology& t, int i) {
  const Node& n = t.node(i);
  std::ostringstream o;
  o << t.label(i);
  switch (n.kind) {
    case NodeKind::kCpu:
      o << " (numa " << n.cpu.numaId;
      if (!n.cpu.arch.empty()) o << ", " << n.cpu.arch;
      if (!n.cpu.vendor.empty()) o << " " << n.cpu.vendor;
      if (n.cpu.familyId >= 0) o << " family " << n.cpu.familyId << " model " << n.cpu.modelId;
      if (n.cpu.cores) o << ", " << n.cpu.cores << " cores";
      if (n.cpu.pus) o << ", " << n.cpu.pus << " PUs";
      o << ")";
      break;
    case NodeKind::kPciSwitch:
      o << " (class " << n.pci.classCode << ")";
      break;
    case NodeKind::kGpu:
      o << " " << n.pci.busId << (n.gpu.sm >= 0 ? " sm" + std::to_string(n.gpu.sm) : "");
      if (!n.gpu.name.empty()) o << " \"" << n.gpu.name << "\"";
      if (n.completed) o << " (completed)";
      break;
    case NodeKind::kNic:
      if (!n.pci.classCode.empty())
        o << " (class " << n.pci.classCode << ")";
      else
        o << " (no PCI device)";
      break;
    case NodeKind::kNet:
      o << " dev " << n.net.dev;
      if (n.net.port > 0) o << " port " << n.net.port;
      o << ", " << (n.net.linkLayer.empty() ? "" : n.net.linkLayer + " ")
        << speedText(n.net.speedMbps);
      if (n.completed) o << " (completed)";
      break;
    default:
      break;
  }
  return o.str();
}

std::string linkText(const Link& l) {
  std::string s = std::string(linkKindName(l.kind));
  if (l.count) s += " x" + std::to_string(l.count);
  return s + " " + formatBandwidth(l.bw);
}

void tree(const Topology& t, int i, int depth, std::string* out) {
  std::string pad(static_cast<size_t>(depth) * 2, ' ');
  const Node& n = t.node(i);
  std::string up;
  if (n.parent >= 0)
    for (int l : t.linksAt(i))
      if (t.link(l).other(i) == n.parent) up = "  [" + linkText(t.link(l)) + "]";
  *out += pad + nodeLine(t, i) + up + "\n";
  // Links that are not the tree's: NVLink peers, pcilinks, C2C.
  for (int l : t.linksAt(i)) {
    const Link& link = t.link(l);
    int o = link.other(i);
    if (o == n.parent || t.node(o).parent == i || link.derived) continue;
    if (link.kind == LinkKind::kNvLink || link.kind == LinkKind::kC2c ||
        link.kind == LinkKind::kLoc) {
      if (t.node(o).kind == NodeKind::kGpu && o < i && link.kind == LinkKind::kNvLink) continue;
      *out += pad + "  = " + linkText(link) + " -> " + (o == i ? "itself" : t.label(o)) + "\n";
    }
  }
  for (int c : t.children(i)) tree(t, c, depth + 1, out);
}

}  // namespace

std::string renderTree(const Topology& t) {
  std::string out;
  for (int h = 0; h < t.hostCount(); ++h) {
    char hash[32];
    std::snprintf(hash, sizeof(hash), "%016llx",
                  static_cast<unsigned long long>(t.host(h).hostHash));
    out += "host" + std::to_string(h) + " [hash " + hash + "] " + describeHost(t, h) + "\n";
    for (const CacheInfo& c : t.host(h).caches)
      out += "  cache L" + std::to_string(c.level) + " " + c.type + " " + formatBytes(c.sizeBytes) +
             " x" + std::to_string(c.count) + "\n";
    for (int c : t.children(t.hostNode(h))) tree(t, c, 1, &out);
    int nvs = t.findNvSwitch(h);
    if (nvs >= 0) {
      out += "  nvswitch:";
      for (int l : t.linksAt(nvs))
        out += " " + t.label(t.link(l).other(nvs)) + "(" + linkText(t.link(l)) + ")";
      out += "\n";
    }
    for (const Link& l : t.links())
      if (l.kind == LinkKind::kSys && t.node(l.a).host == h)
        out += "  = " + linkText(l) + " " + t.label(l.a) + " <-> " + t.label(l.b) + "\n";
  }
  for (int f : t.find(NodeKind::kNetSwitch)) {
    out += t.label(f) + ":";
    for (int l : t.linksAt(f))
      out += " " + t.label(t.link(l).other(f)) + "(" + linkText(t.link(l)) + ")";
    out += "\n";
  }
  return out;
}

std::string renderMatrix(const Topology& t, const PathOptions& options, int limit) {
  std::vector<int> ends;
  for (int g : t.find(NodeKind::kGpu)) ends.push_back(g);
  for (int n : t.find(NodeKind::kNet)) ends.push_back(n);
  if (ends.empty()) return "";
  bool cut = static_cast<int>(ends.size()) > limit;
  if (cut) ends.resize(limit);
  size_t w = 10;
  for (int e : ends) w = std::max(w, t.label(e).size() + 1);
  auto cell = [&](const std::string& s) {
    std::string c = s.substr(0, w);
    return c + std::string(w - c.size(), ' ');
  };
  std::string out = cell("");
  for (int e : ends) out += cell(t.label(e));
  out += "\n";
  for (int a : ends) {
    out += cell(t.label(a));
    std::vector<Path> paths = t.pathsFrom(a, options);
    for (int b : ends) {
      if (a == b) {
        out += cell("X");
        continue;
      }
      const Path& p = paths[b];
      char buf[48];
      if (!p.connected())
        std::snprintf(buf, sizeof(buf), "-");
      else
        std::snprintf(buf, sizeof(buf), "%s %.4g", pathTypeName(p.type), p.bw);
      out += cell(buf);
    }
    out += "\n";
  }
  if (cut) out += "(first " + std::to_string(limit) + " endpoints only)\n";
  out +=
      "cells: path type and bottleneck GB/s (LOC < NVL < NVB < C2C < PIX < PXB < PHB < SYS < "
      "NET)\n";
  return out;
}

std::string renderDot(const Topology& t) {
  auto esc = [](const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '"' || c == '\\') o += '\\';
      o += c;
    }
    return o;
  };
  std::ostringstream o;
  o << "graph topology {\n  graph [rankdir=TB, fontname=\"Helvetica\"];\n"
    << "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", "
       "fontsize=9];\n";
  auto shape = [](NodeKind k) {
    switch (k) {
      case NodeKind::kCpu:
        return "box, style=filled, fillcolor=\"#dde8f7\"";
      case NodeKind::kPciSwitch:
        return "ellipse";
      case NodeKind::kGpu:
        return "box3d, style=filled, fillcolor=\"#cfeecf\"";
      case NodeKind::kNic:
        return "component";
      case NodeKind::kNet:
        return "cds";
      case NodeKind::kNvSwitch:
        return "doubleoctagon, style=filled, fillcolor=\"#b6e3b6\"";
      case NodeKind::kNetSwitch:
        return "hexagon, style=filled, fillcolor=\"#f7e2c4\"";
      default:
        return "plaintext";
    }
  };
  for (int h = 0; h < t.hostCount(); ++h) {
    o << "  subgraph cluster_h" << h << " {\n    label=\"" << esc(describeHost(t, h).substr(0, 80))
      << "\";\n";
    for (size_t i = 0; i < t.nodes().size(); ++i) {
      const Node& n = t.node(static_cast<int>(i));
      if (n.host != h || n.kind == NodeKind::kHost) continue;
      std::string label = t.label(static_cast<int>(i));
      if (n.kind == NodeKind::kGpu && n.gpu.sm >= 0) label += "\\nsm" + std::to_string(n.gpu.sm);
      if (n.kind == NodeKind::kNet && n.net.speedMbps > 0)
        label += "\\n" + speedText(n.net.speedMbps);
      o << "    n" << i << " [label=\"" << esc(label) << "\", shape=" << shape(n.kind) << "];\n";
    }
    o << "  }\n";
  }
  for (int f : t.find(NodeKind::kNetSwitch))
    o << "  n" << f << " [label=\"" << esc(t.label(f))
      << "\", shape=" << shape(NodeKind::kNetSwitch) << "];\n";
  for (const Link& l : t.links()) {
    if (l.a == l.b) continue;
    const char* style = l.kind == LinkKind::kNvLink ? "color=\"#2e8b2e\", penwidth=2"
                        : l.kind == LinkKind::kSys  ? "style=dashed"
                        : l.kind == LinkKind::kNet  ? "color=\"#c06000\""
                        : l.kind == LinkKind::kLoc  ? "style=dotted"
                                                    : "color=black";
    o << "  n" << l.a << " -- n" << l.b << " [label=\"" << linkText(l) << "\", " << style << "];\n";
  }
  o << "}\n";
  return o.str();
}

}  // namespace weft::topo
