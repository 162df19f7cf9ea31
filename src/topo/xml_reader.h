// Reads NCCL topology XML (NCCL_TOPO_FILE; NCCL's src/graph/xml.cc format) into a Topology.
//
// Accepts what NCCL writes and what people hand-write for it: <system version="1"> with <cpu>
// elements holding <pci> trees, <gpu> with <nvlink>/<c2c>, <nic> with <net>, <pcilink>. Partial
// files are completed the way NCCL completes them from the live machine, minus the machine: a
// <pci> of class 0x03xxxx without <gpu> becomes a GPU (dev numbered in bus-id order), one of class
// 0x02xxxx without <nic> a NIC with one port (InfiniBand for 0x0207xx). Unknown attributes and
// elements are kept and written back. Every problem is a weft::Error naming the element and line.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "src/topo/topology.h"

namespace weft::topo {

struct XmlReadOptions {
  LinkRates rates = LinkRates::nominal();
  bool complete = true;             // complete partial descriptions (see above)
  std::string source = "<string>";  // file name for messages
  size_t maxBytes = 16u << 20;      // larger inputs are refused
  size_t maxElements = 100000;
  int maxDepth = 64;
};

// Parses `text`; throws Error(kInvalidArgument) with "<source>:<line>: ..." on malformed input.
Topology readTopologyXml(std::string_view text, const XmlReadOptions& options = {});

// Reads a file (options.source defaults to the path); throws Error(kSystemError) if unreadable.
Topology readTopologyFile(const std::string& path, XmlReadOptions options = {});

}  // namespace weft::topo
