// Discovery of this host's topology: runs the probes (each optional), turns what they found into
// a graph, or loads NCCL_TOPO_FILE and completes it from the probes the way NCCL completes it from
// NVML and the network plugin. localDiscovery() does this once per process.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/common/tuning.h"
#include "src/topo/probes/probe.h"
#include "src/topo/topology.h"

namespace weft::topo {

struct ProbeSelection {
  bool hwloc = true, sysfsNet = true, ibverbs = true, nvml = true, cuda = true;
  bool operator==(const ProbeSelection&) const = default;
};
// WEFT_TOPO_PROBES syntax: "" or "all"; "none"; a comma list of hwloc, sysfs, ibverbs, nvml,
// cuda; or "^list" to exclude. Throws Error(kInvalidArgument) on an unknown name.
ProbeSelection parseProbeSelection(const std::string& spec);

struct DiscoverOptions {
  ProbeSelection probes;
  std::string sysfsRoot = "/sys";
  std::string hwlocSynthetic;  // tests: an hwloc synthetic machine instead of this one
  LinkRates rates = LinkRates::nominal();
  uint64_t hostHash = 0;  // 0: weft::hostHash(hostId)
  std::string hostId;     // WEFT_HOST_ID as the caller's tuning gives it
};

struct ProbeResults {
  std::vector<probe::Report> reports;
  bool haveHwloc = false;
  probe::HwlocResult hwloc;
  bool haveNet = false;
  std::vector<probe::NetInterface> interfaces;
  bool haveIb = false;
  std::vector<probe::IbDevice> ib;
  bool haveNvml = false;
  std::vector<probe::NvmlGpu> nvml;
  bool haveCuda = false;
  std::vector<probe::CudaGpu> cuda;
};

// Runs the selected probes. The CUDA driver is only asked when NVML found nothing.
ProbeResults runProbes(const DiscoverOptions& options);

// The host graph from probe results (pure: tests feed hand-made results).
Topology buildHostTopology(const ProbeResults& results, const DiscoverOptions& options);

// Completes host `host` of a loaded topology from probe results: GPUs named by bus id get their
// index, sm and name when missing and their NVLinks when the file has none; made-up network
// ports of NICs named by bus id get the live port's name, speed and link layer.
void completeFromProbes(Topology* topology, int host, const ProbeResults& results);

struct Discovery {
  std::shared_ptr<const Topology> topology;  // one host
  std::string source;                        // "probe" or "NCCL_TOPO_FILE=<path>"
  std::vector<probe::Report> reports;
  std::string xml;  // the topology as NCCL XML
};

// Probes (uncached) and builds.
Discovery discoverHost(const DiscoverOptions& options);

// This process's host topology: NCCL_TOPO_FILE when set (completed from the probes), else the
// probes (WEFT_TOPO_PROBES selects them, WEFT_TOPO_RATES the rate table), as `tuning` gives
// them. Computed once per setting and shared; thread-safe. Throws on a malformed NCCL_TOPO_FILE.
std::shared_ptr<const Discovery> localDiscovery(const Tuning& tuning);
// How many times this process ran the probes (tests check that communicators share them).
int localProbeRuns();

// One line per probe: "hwloc: 2 package(s), ...; nvml: not available (libnvidia-ml.so.1 not
// found); ...".
std::string probeSummary(const std::vector<probe::Report>& reports);

// The NUMA domain of the CPU this thread runs on, from the CPU nodes' affinity masks (-1 if none
// matches).
int currentNumaNode(const Topology& topology, int host);

}  // namespace weft::topo
