// The system topology of a communicator: every host's graph, joined by the network fabric, with
// each rank placed on a node (the GPU it drives, else the NUMA domain it runs on). Ranks exchange
// their host topologies at init through an allgather the caller provides, so this module knows no
// bootstrap.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/topo/discover.h"
#include "src/topo/topology.h"

namespace weft::topo {

// Where a rank sits: "cpu:<numa>" or "gpu:<bus id>".
struct Endpoint {
  bool gpu = false;
  int numaId = -1;
  std::string busId;
  std::string text() const;
  static Endpoint parse(const std::string& text);  // throws Error(kInvalidArgument)
};

class SystemTopology {
 public:
  const Topology& graph() const { return *graph_; }
  std::shared_ptr<const Topology> graphPtr() const { return graph_; }
  int nranks() const { return static_cast<int>(rankNode_.size()); }
  int rankHost(int rank) const { return rankHost_.at(rank); }
  int rankNode(int rank) const { return rankNode_.at(rank); }
  // "probe" / "NCCL_TOPO_FILE=..." of each host's first rank, and the probe summary.
  const std::string& source() const { return source_; }

  // Path between the nodes of two ranks (LOC at kLocalBw when they share a node).
  Path rankPath(int a, int b) const;
  // Slowest path between two ranks on one host / on different hosts; 0 when there is no pair.
  double minIntraHostBandwidth() const { return minIntra_; }
  double minInterHostBandwidth() const { return minInter_; }

  // One screen: hosts, GPUs and NICs, where the ranks are, the slowest paths.
  std::string summary() const;

 private:
  friend SystemTopology assembleSystem(const std::vector<std::string>& blobs,
                                       std::shared_ptr<const Topology> mine,
                                       const std::string& myXml);
  std::shared_ptr<const Topology> graph_;
  std::vector<int> rankHost_, rankNode_;
  std::string source_;
  double minIntra_ = 0, minInter_ = 0;
  PathType minIntraType_ = PathType::kLoc, minInterType_ = PathType::kNet;
};

// What this rank contributes.
struct LocalRankInfo {
  int rank = 0, nranks = 1;
  uint64_t hostHash = 0;  // the transports' host hash (0: buildSystemTopology finds it)
  Endpoint endpoint;      // numaId -1: the NUMA domain this thread runs on now
  std::shared_ptr<const Discovery> discovery;  // nullptr: localDiscovery(tuning)
};

// Collective over ranks: takes this rank's bytes, returns every rank's (index = rank).
using AllgatherFn = std::function<std::vector<std::string>(const std::string& mine)>;

// Variable-size allgather from a fixed-size one (sizes first, then padded blocks).
AllgatherFn variableAllgather(int rank, int nranks,
                              std::function<void(void* data, size_t bytesPerRank)> fixed);

// Exchanges host topologies and builds the system graph. One rank: no exchange. `tuning` gives
// what `me` leaves out: the host's discovery and WEFT_HOST_ID for its hash.
SystemTopology buildSystemTopology(const LocalRankInfo& me, const AllgatherFn& allgather,
                                   const Tuning& tuning);

// The wire form of one rank's contribution, and the system built from all of them (exposed for
// tests and the fuzzer; a malformed blob is an Error naming the rank).
std::string encodeRankBlob(const LocalRankInfo& me, const Discovery& d);
SystemTopology assembleSystem(const std::vector<std::string>& blobs,
                              std::shared_ptr<const Topology> mine = nullptr,
                              const std::string& myXml = "");

// At communicator init: logs the topology at INFO on rank 0, and writes it as NCCL XML to
// NCCL_TOPO_DUMP_FILE from NCCL_TOPO_DUMP_FILE_RANK (as `tuning` gives them).
void reportAtInit(const SystemTopology& system, int rank, const Tuning& tuning);

}  // namespace weft::topo
