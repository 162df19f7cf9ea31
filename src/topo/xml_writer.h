// Writes a Topology as NCCL topology XML (NCCL_TOPO_DUMP_FILE), in the exact style NCCL writes
// and parses: no XML declaration, two-space indent, <name attr="value"/>. Weft-only facts go in
// attributes NCCL ignores and in <weft_host> elements (which NCCL skips), so the file still loads
// in NCCL and reads back here into the same graph.
#pragma once
#include <string>

#include "src/topo/topology.h"

namespace weft::topo {

struct XmlWriteOptions {
  std::string comment;  // written as an XML comment before <system> when not empty
};

std::string writeTopologyXml(const Topology& topology, const XmlWriteOptions& options = {});

// Writes to `path` (atomically: a temporary file, then rename); throws Error(kSystemError).
void writeTopologyFile(const Topology& topology, const std::string& path,
                       const XmlWriteOptions& options = {});

}  // namespace weft::topo
