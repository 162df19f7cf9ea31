// weft-topo: shows the topology Weft discovers on this host (or reads from NCCL topology XML) as
// a tree with bandwidths and a path matrix, writes it as NCCL XML, and draws it with Graphviz.
//
//   weft-topo                          # probe this host, print the tree and the path matrix
//   weft-topo --load dgx1.xml --matrix --no-tree
//   weft-topo --xml out.xml --dot out.dot --png out.png
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "src/common/error.h"
#include "src/topo/discover.h"
#include "src/topo/render.h"
#include "src/topo/xml_reader.h"
#include "src/topo/xml_writer.h"

extern char** environ;

namespace {

using namespace weft::topo;

const char* kUsage =
    "usage: weft-topo [options]\n"
    "  --load FILE       read NCCL topology XML instead of probing this host (default:\n"
    "                    NCCL_TOPO_FILE when set)\n"
    "  --probes LIST     probes to run: all, none, hwloc,sysfs,ibverbs,nvml,cuda or ^list\n"
    "  --rates NAME      link rate table: nominal (default) or nccl\n"
    "  --no-tree         do not print the tree\n"
    "  --matrix          print the path matrix between GPUs and network ports\n"
    "  --no-nvb          paths may not relay through a GPU (NCCL_NVB_DISABLE)\n"
    "  --path A B        print the path between two nodes named as in the tree (e.g. gpu0 gpu5)\n"
    "  --report          print what each probe found\n"
    "  --xml FILE        write NCCL topology XML ('-' for stdout)\n"
    "  --dot FILE        write Graphviz dot ('-' for stdout)\n"
    "  --png FILE        draw a PNG with Graphviz 'dot'\n"
    "  -h, --help        this text\n";

int findByLabel(const Topology& t, const std::string& label) {
  for (size_t i = 0; i < t.nodes().size(); ++i)
    if (t.label(static_cast<int>(i)) == label) return static_cast<int>(i);
  return -1;
}

void writeText(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) weft::fail(weft::Status::kSystemError, "cannot write " + path);
}

// Runs `dot -Tpng in -o out`; returns an error message or "".
std::string drawPng(const std::string& dotText, const std::string& png) {
  char tmpl[] = "/tmp/weft-topo-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return "cannot create a temporary file";
  std::string tmp = tmpl;
  bool ok = write(fd, dotText.data(), dotText.size()) == static_cast<ssize_t>(dotText.size());
  close(fd);
  if (!ok) {
    unlink(tmp.c_str());
    return "cannot write " + tmp;
  }
  std::string outArg = png;
  std::vector<char*> argv = {const_cast<char*>("dot"),
                             const_cast<char*>("-Tpng"),
                             tmp.data(),
                             const_cast<char*>("-o"),
                             outArg.data(),
                             nullptr};
  pid_t pid;
  int rc = posix_spawnp(&pid, "dot", nullptr, nullptr, argv.data(), environ);
  std::string err;
  if (rc != 0) {
    err = "graphviz 'dot' not found (install the graphviz package)";
  } else {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) err = "'dot -Tpng' failed";
  }
  unlink(tmp.c_str());
  return err;
}

}  // namespace

int main(int argc, char** argv) {
  std::string load, probes = "all", rates = "nominal", xmlOut, dotOut, pngOut, pathA, pathB;
  bool showTree = true, showMatrix = false, showReport = false, nvb = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        std::cerr << "weft-topo: " << a << " needs a value\n" << kUsage;
        std::exit(2);
      }
      *out = argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--load")
      value(&load);
    else if (a == "--probes")
      value(&probes);
    else if (a == "--rates")
      value(&rates);
    else if (a == "--xml")
      value(&xmlOut);
    else if (a == "--dot")
      value(&dotOut);
    else if (a == "--png")
      value(&pngOut);
    else if (a == "--no-tree")
      showTree = false;
    else if (a == "--matrix")
      showMatrix = true;
    else if (a == "--report")
      showReport = true;
    else if (a == "--no-nvb")
      nvb = false;
    else if (a == "--path") {
      value(&pathA);
      value(&pathB);
    } else {
      std::cerr << "weft-topo: unknown option " << a << "\n" << kUsage;
      return 2;
    }
  }
  // Like the library: NCCL_TOPO_FILE stands in for the probes unless --load says otherwise.
  if (load.empty())
    if (const char* f = std::getenv("NCCL_TOPO_FILE"); f && *f) load = f;
  try {
    std::shared_ptr<const Topology> topo;
    std::vector<probe::Report> reports;
    std::string source;
    if (!load.empty()) {
      XmlReadOptions ro;
      ro.rates = LinkRates::byName(rates);
      topo = std::make_shared<const Topology>(readTopologyFile(load, ro));
      source = load;
    } else {
      DiscoverOptions o;
      o.probes = parseProbeSelection(probes);
      o.rates = LinkRates::byName(rates);
      if (const char* id = std::getenv("WEFT_HOST_ID")) o.hostId = id;
      Discovery d = discoverHost(o);
      topo = d.topology;
      reports = d.reports;
      source = "probes of this host";
    }
    const bool quietStdout = xmlOut == "-" || dotOut == "-";
    if (showReport && !reports.empty())
      for (const auto& r : reports)
        std::cout << "probe " << r.name << ": "
                  << (!r.ran        ? "off"
                      : r.available ? "ok"
                                    : "not available")
                  << " - " << r.detail << "\n";
    if (showTree && !quietStdout) std::cout << "# " << source << "\n" << renderTree(*topo);
    PathOptions po;
    po.gpuRelay = nvb;
    if (showMatrix && !quietStdout) std::cout << renderMatrix(*topo, po);
    if (!pathA.empty()) {
      int a = findByLabel(*topo, pathA), b = findByLabel(*topo, pathB);
      if (a < 0 || b < 0) {
        std::cerr << "weft-topo: no node named '" << (a < 0 ? pathA : pathB) << "'\n";
        return 1;
      }
      Path p = topo->path(a, b, po);
      std::cout << pathA << " -> " << pathB << ": " << pathTypeName(p.type) << " "
                << formatBandwidth(p.bw) << ", " << p.hops << " hop(s), " << p.latencyUs << " us:";
      for (int n : p.nodes) std::cout << " " << topo->label(n);
      std::cout << "\n";
    }
    if (!xmlOut.empty()) {
      XmlWriteOptions wo;
      wo.comment = "written by weft-topo from " + source;
      if (xmlOut == "-")
        std::cout << writeTopologyXml(*topo, wo);
      else
        writeTopologyFile(*topo, xmlOut, wo);
    }
    std::string dot = renderDot(*topo);
    if (!dotOut.empty()) writeText(dotOut, dot);
    if (!pngOut.empty()) {
      std::string err = drawPng(dot, pngOut);
      if (!err.empty()) {
        std::cerr << "weft-topo: " << err << "\n";
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "weft-topo: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
