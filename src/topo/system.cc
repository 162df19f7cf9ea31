#include "src/topo/system.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "src/common/error.h"
#include "src/common/host_id.h"
#include "src/common/log.h"
#include "src/topo/render.h"
#include "src/topo/xml_reader.h"
#include "src/topo/xml_writer.h"

namespace weft::topo {

namespace {
constexpr const char* kBlobMagic = "weft-topo 1";
constexpr const char* kErrorMagic = "weft-topo error";
constexpr size_t kMaxBlobBytes = 4u << 20;
}  // namespace

std::string Endpoint::text() const {
  return gpu ? "gpu:" + busId : "cpu:" + std::to_string(numaId);
}

Endpoint Endpoint::parse(const std::string& s) {
  Endpoint e;
  if (s.rfind("gpu:", 0) == 0 && s.size() > 4 && s.size() < 64) {
    e.gpu = true;
    e.busId = s.substr(4);
    return e;
  }
  if (s.rfind("cpu:", 0) == 0 && s.size() > 4 && s.size() < 16) {
    char* end = nullptr;
    long v = std::strtol(s.c_str() + 4, &end, 10);
    if (*end == '\0' && v >= -1 && v < (1 << 20)) {
      e.numaId = static_cast<int>(v);
      return e;
    }
  }
  fail(Status::kInvalidArgument, "malformed rank endpoint '" + s.substr(0, 64) + "'");
}

AllgatherFn variableAllgather(int rank, int nranks,
                              std::function<void(void* data, size_t bytesPerRank)> fixed) {
  return [rank, nranks, fixed](const std::string& mine) {
    std::vector<uint64_t> sizes(nranks, 0);
    sizes[rank] = mine.size();
    fixed(sizes.data(), sizeof(uint64_t));
    uint64_t maxSize = *std::max_element(sizes.begin(), sizes.end());
    if (maxSize > kMaxBlobBytes)
      fail(Status::kInternalError, "topology exchange: a rank announced " +
                                       std::to_string(maxSize) + " bytes (limit " +
                                       std::to_string(kMaxBlobBytes) + ")");
    std::vector<std::string> out(nranks);
    if (maxSize == 0) return out;
    std::vector<char> buf(maxSize * nranks, 0);
    std::memcpy(buf.data() + rank * maxSize, mine.data(), mine.size());
    fixed(buf.data(), maxSize);
    for (int r = 0; r < nranks; ++r) out[r].assign(buf.data() + r * maxSize, sizes[r]);
    return out;
  };
}

std::string encodeRankBlob(const LocalRankInfo& me, const Discovery& d) {
  char hash[32];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(me.hostHash));
  std::string source = d.source;
  for (char& c : source)
    if (c == '\n') c = ' ';
  return std::string(kBlobMagic) + "\n" + hash + "\n" + me.endpoint.text() + "\n" + source + "\n" +
         d.xml;
}

namespace {

struct Blob {
  uint64_t hostHash = 0;
  Endpoint endpoint;
  std::string source;
  std::string_view xml;
};

Blob decode(const std::string& s, int rank) {
  auto bad = [rank](const std::string& why) -> Blob {
    fail(Status::kInternalError,
         "topology exchange: rank " + std::to_string(rank) + " sent a malformed topology: " + why);
  };
  if (s.size() > kMaxBlobBytes) return bad("too large");
  size_t pos = 0;
  std::string lines[4];
  for (auto& line : lines) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos || nl - pos > 4096) return bad("truncated header");
    line = s.substr(pos, nl - pos);
    pos = nl + 1;
  }
  if (lines[0] != kBlobMagic) return bad("bad magic");
  Blob b;
  char* end = nullptr;
  b.hostHash = std::strtoull(lines[1].c_str(), &end, 16);
  if (lines[1].empty() || *end != '\0') return bad("bad host hash");
  try {
    b.endpoint = Endpoint::parse(lines[2]);
  } catch (const Error& e) {
    return bad(e.what());
  }
  b.source = lines[3];
  b.xml = std::string_view(s).substr(pos);
  return b;
}

// Parsed host topologies, shared by the ranks of a process (thread ranks send identical XML).
std::shared_ptr<const Topology> parseHost(std::string_view xml, int rank, const LinkRates& rates) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Topology>, std::less<>> cache;
  std::string key = rates.name + "\n" + std::string(xml);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  XmlReadOptions o;
  o.rates = rates;
  o.source = "topology of rank " + std::to_string(rank);
  o.maxBytes = kMaxBlobBytes;
  std::shared_ptr<const Topology> t;
  try {
    t = std::make_shared<const Topology>(readTopologyXml(xml, o));
  } catch (const Error& e) {
    fail(Status::kInternalError, std::string("topology exchange: ") + e.what());
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 64) cache.clear();
  cache[key] = t;
  return t;
}

}  // namespace

SystemTopology assembleSystem(const std::vector<std::string>& blobs,
                              std::shared_ptr<const Topology> mine, const std::string& myXml) {
  const int nranks = static_cast<int>(blobs.size());
  if (nranks == 0) fail(Status::kInternalError, "topology exchange: no ranks");
  std::vector<Blob> decoded;
  decoded.reserve(nranks);
  for (int r = 0; r < nranks; ++r) decoded.push_back(decode(blobs[r], r));

  LinkRates rates = mine ? mine->rates() : LinkRates::nominal();
  auto graph = std::make_shared<Topology>(rates);
  std::map<uint64_t, int> hostOf;  // host hash -> system host
  std::vector<int> firstRank;
  std::set<std::string> sources;
  for (int r = 0; r < nranks; ++r) {
    const Blob& b = decoded[r];
    auto it = hostOf.find(b.hostHash);
    if (it != hostOf.end()) {
      if (b.xml != decoded[firstRank[it->second]].xml)
        WEFT_INFO(INIT,
                  "topology: rank %d describes host %d differently from rank %d; using rank %d's",
                  r, it->second, firstRank[it->second], firstRank[it->second]);
      continue;
    }
    std::shared_ptr<const Topology> host =
        (mine && b.xml == myXml) ? mine : parseHost(b.xml, r, rates);
    if (host->hostCount() < 1)
      fail(Status::kInternalError,
           "topology exchange: rank " + std::to_string(r) + " sent no host");
    int h = graph->appendHost(*host, 0);
    graph->mutableHost(h).hostHash = b.hostHash;
    hostOf[b.hostHash] = h;
    firstRank.push_back(r);
    sources.insert(b.source);
  }
  graph->finalize();

  SystemTopology s;
  s.rankHost_.resize(nranks);
  s.rankNode_.resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    int h = hostOf[decoded[r].hostHash];
    const Endpoint& e = decoded[r].endpoint;
    int node = -1;
    if (e.gpu) {
      node = graph->findBusId(h, e.busId);
      if (node >= 0 && graph->node(node).kind != NodeKind::kGpu) node = -1;
    } else {
      node = graph->findCpu(h, e.numaId);
    }
    if (node < 0) {
      auto cpus = graph->find(NodeKind::kCpu, h);
      node = cpus.empty() ? graph->hostNode(h) : cpus.front();
    }
    s.rankHost_[r] = h;
    s.rankNode_[r] = node;
  }
  for (const auto& src : sources) s.source_ += (s.source_.empty() ? "" : ", ") + src;
  s.graph_ = graph;

  // Slowest rank-to-rank paths, one search per distinct rank node.
  std::set<int> ends(s.rankNode_.begin(), s.rankNode_.end());
  double minIntra = 0, minInter = 0;
  PathType intraType = PathType::kLoc, interType = PathType::kNet;
  for (int a : ends) {
    std::vector<Path> paths = graph->pathsFrom(a);
    for (int r = 0; r < nranks; ++r) {
      int b = s.rankNode_[r];
      double bw = b == a ? kLocalBw : paths[b].bw;
      PathType type = b == a ? PathType::kLoc : paths[b].type;
      bool sameHost = graph->node(a).host == graph->node(b).host;
      double& m = sameHost ? minIntra : minInter;
      if (m == 0 || bw < m) {
        m = bw;
        (sameHost ? intraType : interType) = type;
      }
    }
  }
  s.minIntraType_ = intraType;
  s.minInterType_ = interType;
  // Pairs exist only when two ranks share / do not share a host.
  std::map<int, int> perHost;
  for (int h : s.rankHost_) perHost[h]++;
  bool intraPair = false;
  for (const auto& [h, n] : perHost) intraPair |= n > 1;
  s.minIntra_ = intraPair ? minIntra : 0;
  s.minInter_ = perHost.size() > 1 ? minInter : 0;
  return s;
}

SystemTopology buildSystemTopology(const LocalRankInfo& in, const AllgatherFn& allgather,
                                   const Tuning& tuning) {
  LocalRankInfo me = in;
  // A rank that cannot describe its host (a malformed NCCL_TOPO_FILE) still takes part in the
  // exchange, so that every rank fails now with its message instead of waiting for it.
  std::string blob;
  Status failure = Status::kSuccess;
  try {
    if (!me.discovery) me.discovery = localDiscovery(tuning);
    if (!me.hostHash) me.hostHash = weft::hostHash(tuning.hostId);
    if (!me.endpoint.gpu && me.endpoint.numaId < 0)
      me.endpoint.numaId = currentNumaNode(*me.discovery->topology, 0);
    blob = encodeRankBlob(me, *me.discovery);
  } catch (const Error& e) {
    if (me.nranks <= 1) throw;
    failure = e.code();
    blob = std::string(kErrorMagic) + "\n" + std::to_string(static_cast<int>(e.code())) + "\n" +
           std::string(e.what()).substr(0, 2000);
  }
  std::vector<std::string> blobs;
  if (me.nranks <= 1) {
    blobs.push_back(blob);
  } else {
    blobs = allgather(blob);
    if (static_cast<int>(blobs.size()) != me.nranks)
      fail(Status::kInternalError, "topology exchange returned " + std::to_string(blobs.size()) +
                                       " blobs for " + std::to_string(me.nranks) + " ranks");
  }
  for (int r = 0; r < static_cast<int>(blobs.size()); ++r) {
    const std::string& b = blobs[r];
    if (b.rfind(kErrorMagic, 0) != 0) continue;
    size_t nl1 = b.find('\n'), nl2 = b.find('\n', nl1 + 1);
    std::string what = nl2 == std::string::npos ? b : b.substr(nl2 + 1);
    Status code = r == me.rank ? failure : Status::kRemoteError;
    fail(code == Status::kSuccess ? Status::kInternalError : code,
         "topology: rank " + std::to_string(r) + " could not describe its host: " + what);
  }
  return assembleSystem(blobs, me.discovery->topology, me.discovery->xml);
}

Path SystemTopology::rankPath(int a, int b) const {
  int na = rankNode(a), nb = rankNode(b);
  if (na == nb) {
    Path p;
    p.type = PathType::kLoc;
    p.bw = kLocalBw;
    p.nodes = {na};
    return p;
  }
  return graph_->path(na, nb);
}

std::string SystemTopology::summary() const {
  const Topology& t = *graph_;
  std::ostringstream o;
  o << "topology: " << t.hostCount() << " host(s), " << nranks() << " rank(s); source " << source_
    << "\n";
  const int shown = std::min(t.hostCount(), 4);
  for (int h = 0; h < shown; ++h) o << "  host" << h << " " << describeHost(t, h) << "\n";
  if (t.hostCount() > shown) o << "  ... " << t.hostCount() - shown << " more host(s)\n";
  // Where the ranks are, one line per host: "host0: ranks 0-3 on cpu0, 4-7 on cpu1" or
  // "host1: ranks 8-15, one per gpu (gpu0..gpu7)".
  auto local = [&t](int node) {
    std::string l = t.label(node);
    size_t slash = l.find('/');
    return slash == std::string::npos ? l : l.substr(slash + 1);
  };
  std::map<int, std::vector<int>> byHost;
  for (int r = 0; r < nranks(); ++r) byHost[rankHost_[r]].push_back(r);
  int hostLines = 0;
  for (const auto& [h, ranks] : byHost) {
    if (++hostLines > 4) {
      o << "  ... ranks on " << byHost.size() - 4 << " more host(s)\n";
      break;
    }
    struct Run {
      int first, last, node;
    };
    std::vector<Run> runs;
    for (int r : ranks) {
      if (!runs.empty() && runs.back().last == r - 1 && runs.back().node == rankNode_[r])
        runs.back().last = r;
      else
        runs.push_back({r, r, rankNode_[r]});
    }
    std::set<int> nodes;
    bool sameKind = true;
    for (const Run& run : runs) {
      nodes.insert(run.node);
      sameKind &= t.node(run.node).kind == t.node(runs[0].node).kind;
    }
    bool contiguous = ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size());
    o << "  host" << h << ": ";
    if (runs.size() > 2 && nodes.size() == ranks.size() && sameKind && contiguous) {
      o << "ranks " << ranks.front() << "-" << ranks.back() << ", one per "
        << nodeKindName(t.node(runs[0].node).kind) << " (" << local(runs.front().node) << ".."
        << local(runs.back().node) << ")\n";
      continue;
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      if (i == 6) {
        o << ", ...";
        break;
      }
      o << (i ? ", " : "") << (i ? "" : "ranks ") << runs[i].first;
      if (runs[i].last > runs[i].first) o << "-" << runs[i].last;
      o << " on " << local(runs[i].node);
    }
    o << "\n";
  }
  auto slowest = [](double bw, PathType type) {
    if (bw <= 0) return std::string("(no pair)");
    if (type == PathType::kLoc) return std::string("LOC (the ranks share a node)");
    return std::string(pathTypeName(type)) + " " + formatBandwidth(bw);
  };
  o << "  slowest rank-to-rank path: within a host " << slowest(minIntra_, minIntraType_)
    << ", across hosts " << slowest(minInter_, minInterType_) << "\n";
  return o.str();
}

void reportAtInit(const SystemTopology& system, int rank, const Tuning& tuning) {
  if (rank == 0 && log::enabled(log::Level::kInfo, log::INIT)) {
    std::string s = system.summary();
    std::istringstream lines(s);
    std::string line;
    while (std::getline(lines, line)) WEFT_INFO(INIT, "%s", line.c_str());
  }
  const std::string& dump = tuning.topoDumpFile;
  if (!dump.empty() && rank == tuning.topoDumpRank) {
    try {
      XmlWriteOptions wo;
      wo.comment = "Weft system topology (" + system.source() + ")";
      writeTopologyFile(system.graph(), dump, wo);
      WEFT_INFO(INIT, "topology written to %s", dump.c_str());
    } catch (const Error& e) {
      WEFT_WARN(INIT, "NCCL_TOPO_DUMP_FILE: %s", e.what());
    }
  }
}

}  // namespace weft::topo
