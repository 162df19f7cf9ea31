// Internals of the topology XML reader (src/topo/xml_reader.h): the reader class, whose parts
// live in four files, one step of reading each:
//   xml_reader.cc           the document: size and shape limits, typed attributes, messages
//   xml_reader_elements.cc  <system>, <weft_host>, <cpu>, <pci>, <gpu>, <nic> into nodes
//   xml_reader_links.cc     <pcilink>, <nvlink> and <c2c>, which name their far end by bus id
//   xml_reader_complete.cc  the GPU and network devices a partial description leaves out
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <pugixml.hpp>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "src/topo/topology.h"
#include "src/topo/xml_reader.h"

namespace weft::topo::detail {

class XmlReader {
 public:
  XmlReader(std::string_view text, const XmlReadOptions& o);

  Topology run();

 private:
  // Attributes of one element: typed takes, duplicates refused, the rest kept.
  class Attributes {
   public:
    Attributes(XmlReader* r, const pugi::xml_node& el);
    std::optional<std::string> str(const char* name);
    std::string required(const char* name);
    // Integer (decimal or 0x hex); absent or empty -> `absent`.
    int64_t integer(const char* name, int64_t absent, int64_t lo = INT32_MIN,
                    int64_t hi = INT32_MAX);
    int integer32(const char* name, int absent = -1);
    int requiredInt(const char* name);
    uint64_t hex(const char* name);
    double real(const char* name, double absent);
    // Unused attributes, in document order.
    void rest(Attrs* out);

   private:
    struct Item {
      std::string name, value;
      bool used;
    };
    XmlReader* r_;
    pugi::xml_node el_;
    std::vector<Item> items_;
  };

  // The document (xml_reader.cc).
  size_t lineOf(ptrdiff_t offset) const;
  size_t lineOf(const pugi::xml_node& n) const { return lineOf(n.offset_debug()); }
  std::string describe(const pugi::xml_node& n) const;
  [[noreturn]] void error(const pugi::xml_node& n, const std::string& what) const;
  // Bounds the document before anything recursive looks at it.
  void checkShape(const pugi::xml_document& doc);

  // Elements into nodes (xml_reader_elements.cc).
  int hostFor(uint64_t hash);
  void keep(int node, const std::string& container, const pugi::xml_node& el);
  void parseSystem(const pugi::xml_node& sys);
  void parseWeftHost(const pugi::xml_node& el);
  void parseCpu(const pugi::xml_node& el);
  static std::vector<pugi::xml_node> childrenNamed(const pugi::xml_node& el, const char* name);
  void parsePci(const pugi::xml_node& el, int parent, int h);
  void parseGpu(const pugi::xml_node& el, int idx);
  // A <nic> directly under a <cpu> (virtual or unknown PCI position).
  void parseCpuNic(const pugi::xml_node& el, int cpu, int h);
  void parseNicPorts(const pugi::xml_node& el, int nic, int h);

  // Links named by bus id (xml_reader_links.cc).
  void resolvePciLinks();
  int localCpu(int node) const;
  void resolveNvLinks();
  void resolveC2c();
  int byBus(int h, const std::string& busId) const;
  int linkBetween(int a, int b, LinkKind k) const;
  int addLink(Link l);

  // Completion (xml_reader_complete.cc): the GPU device numbers and network ports a partial
  // description leaves out. NCCL fills these from NVML and the network plugin; we number them in
  // bus-id order.
  void complete();

  std::string_view text_;
  const XmlReadOptions& opt_;
  Topology topo_;
  std::vector<size_t> lineStarts_;
  std::map<uint64_t, int> hostByHash_;
  std::map<std::pair<int, std::string>, size_t> busIds_;
  std::map<std::pair<int, std::string>, int> nodeByBus_;
  std::map<std::pair<int, int>, int> cpuByNuma_;
  std::map<int, int> cpusPerHost_;
  int cpus_ = 0;
  std::map<std::tuple<int, int, int>, int> linkIndex_;
  std::map<int, int> nvSwitch_;
  std::vector<std::pair<int, pugi::xml_node>> pciLinks_, nvLinks_, c2cs_;
  std::vector<int> pendingGpus_, pendingNics_;
};

}  // namespace weft::topo::detail
