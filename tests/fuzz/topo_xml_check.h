// The property both the libFuzzer target and the replay program check on one input: reading
// NCCL topology XML either fails with a weft::Error or gives a graph that writes, reads back
// identically, and can be walked and drawn. Anything else (a crash, another exception, a round
// trip that changes the graph) is a bug.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "src/common/error.h"
#include "src/topo/render.h"
#include "src/topo/xml_reader.h"
#include "src/topo/xml_writer.h"

namespace weft::fuzz {

[[noreturn]] inline void propertyFailed(const std::string& what, std::string_view input) {
  std::fprintf(stderr, "topology XML property violated: %s\ninput (%zu bytes):\n%.*s\n",
               what.c_str(), input.size(), static_cast<int>(std::min<size_t>(input.size(), 4096)),
               input.data());
  std::abort();
}

// Returns true when the input was a topology (false: refused with a weft::Error).
inline bool checkTopologyXml(std::string_view input) {
  topo::XmlReadOptions first;
  first.maxBytes = 1u << 20;
  first.maxElements = 20000;
  first.maxDepth = 60;  // completion may nest a port two levels deeper; the re-read allows 64
  topo::Topology t;
  try {
    t = topo::readTopologyXml(input, first);
  } catch (const Error&) {
    return false;
  }
  std::string x = topo::writeTopologyXml(t);
  topo::Topology back;
  try {
    back = topo::readTopologyXml(x);
  } catch (const Error& e) {
    propertyFailed(std::string("written XML does not read back: ") + e.what() + "\n" + x, input);
  }
  std::string d = t.diff(back);
  if (!d.empty()) propertyFailed("round trip changed the graph: " + d + "\n" + x, input);
  if (topo::writeTopologyXml(back) != x) propertyFailed("writer is not a fixed point\n" + x, input);
  const int n = static_cast<int>(t.nodes().size());
  for (int i = 0; i < n && i < 8; ++i) {
    std::vector<topo::Path> paths = t.pathsFrom(i);
    for (int j = 0; j < n; ++j) {
      const topo::Path& p = paths[j];
      if (p.connected() && (p.nodes.empty() || p.nodes.front() != i || p.nodes.back() != j ||
                            static_cast<int>(p.nodes.size()) != p.hops + 1 || !(p.bw > 0)))
        propertyFailed("inconsistent path " + std::to_string(i) + " -> " + std::to_string(j),
                       input);
    }
  }
  (void)topo::renderTree(t);
  (void)topo::renderMatrix(t, {}, 8);
  (void)topo::renderDot(t);
  return true;
}

}  // namespace weft::fuzz
