// The property for the topology exchange's wire format (what each rank sends at communicator
// init, src/topo/system.h): a set of rank blobs either assembles into a system topology whose
// ranks all sit on nodes and have paths between them, or is refused with a weft::Error.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "src/common/error.h"
#include "src/topo/system.h"
#include "tests/fuzz/topo_xml_check.h"

namespace weft::fuzz {

// Splits fuzz input into rank blobs at "\n--rank--\n" (at most 16 ranks).
inline std::vector<std::string> splitBlobs(std::string_view input) {
  static constexpr std::string_view kSep = "\n--rank--\n";
  std::vector<std::string> blobs;
  size_t pos = 0;
  while (blobs.size() < 15) {
    size_t at = input.find(kSep, pos);
    if (at == std::string_view::npos) break;
    blobs.emplace_back(input.substr(pos, at - pos));
    pos = at + kSep.size();
  }
  blobs.emplace_back(input.substr(pos));
  return blobs;
}

inline bool checkTopologyBlobs(std::string_view input) {
  std::vector<std::string> blobs = splitBlobs(input);
  topo::SystemTopology s;
  try {
    s = topo::assembleSystem(blobs);
  } catch (const Error&) {
    return false;
  }
  const topo::Topology& t = s.graph();
  if (s.nranks() != static_cast<int>(blobs.size())) propertyFailed("rank count changed", input);
  for (int r = 0; r < s.nranks(); ++r) {
    int n = s.rankNode(r);
    if (n < 0 || n >= static_cast<int>(t.nodes().size()) || t.node(n).host != s.rankHost(r))
      propertyFailed("rank " + std::to_string(r) + " placed on a bad node", input);
  }
  for (int r = 1; r < s.nranks() && r < 4; ++r) {
    topo::Path p = s.rankPath(0, r);
    if (p.connected() && p.nodes.empty()) propertyFailed("path without nodes", input);
  }
  (void)s.summary();
  return true;
}

}  // namespace weft::fuzz
