// Runs the topology XML property (topo_xml_check.h) and the exchange-blob property
// (topo_blob_check.h) over a seed corpus and a deterministic set of malformed variants of it
// (truncations, byte flips, hostile shapes), so the malformed-input coverage runs in every build,
// with or without libFuzzer. Arguments: files or directories (*.xml: topology XML; *.txt: rank
// blobs separated by "\n--rank--\n").
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/topo_blob_check.h"
#include "tests/fuzz/topo_xml_check.h"
#include "tests/support/text_file.h"

namespace {

using weft::test::readFile;

std::vector<std::string> listInputs(const std::string& path) {
  std::vector<std::string> out;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::printf("skipping %s (absent)\n", path.c_str());
    return out;
  }
  if (!S_ISDIR(st.st_mode)) return {path};
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      std::string ext = name.size() > 4 ? name.substr(name.size() - 4) : "";
      if (ext == ".xml" || ext == ".txt") out.push_back(path + "/" + name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> hostileInputs() {
  std::vector<std::string> v;
  std::string deep = "<system version=\"1\"><cpu numaid=\"0\">";
  for (int i = 0; i < 20000; ++i)
    deep += "<pci busid=\"0:0:0." + std::to_string(i % 8) + "\" class=\"0x060400\">";
  v.push_back(deep);  // unterminated
  for (int i = 0; i < 20000; ++i) deep += "</pci>";
  v.push_back(deep + "</cpu></system>");
  std::string cpus = "<system version=\"1\">";
  for (int i = 0; i < 5000; ++i)
    cpus +=
        "<cpu numaid=\"" + std::to_string(i) + "\" host_hash=\"" + std::to_string(i % 40) + "\"/>";
  v.push_back(cpus + "</system>");
  v.push_back("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"" + std::string(100000, 'a') +
              "\" class=\"0x060400\"/></cpu></system>");
  v.push_back(
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x060400\">"
      "<pci busid=\"0000:01:00.0\" class=\"0x030200\"/></pci></cpu></system>");
  v.push_back(
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"1\" class=\"0x030200\"><gpu dev=\"0\">"
      "<nvlink target=\"1\" count=\"2147483647\"/><nvlink target=\"1\" "
      "count=\"9\"/></gpu></pci></cpu></system>");
  v.push_back(
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"1\" class=\"0x030200\"><gpu>"
      "<c2c bw=\"2147483647\" count=\"65536\"/></gpu></pci></cpu></system>");
  v.push_back(
      "<system version=\"1\"><cpu numaid=\"0\"><nic><net dev=\"0\" speed=\"9223372036854775807\" "
      "latency=\"1e308\"/></nic></cpu></system>");
  v.push_back(std::string("<system version=\"1\">\0<cpu numaid=\"0\"/></system>", 45));
  v.push_back("\xef\xbb\xbf<system version=\"1\"/>");
  v.push_back(
      "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"aaaa\">]><system version=\"1\" "
      "a=\"&a;&a;\"/>");
  v.push_back(
      "<system version=\"1\"><cpu numaid=\"0\" affinity=\"&#10;&lt;&quot;\x01\"/></system>");
  std::string wide = "<system version=\"1\"><cpu numaid=\"0\">";
  for (int i = 0; i < 3000; ++i) {
    char bus[32];
    std::snprintf(bus, sizeof(bus), "%04x:%02x:00.0", i / 256, i % 256);
    wide += std::string("<pci busid=\"") + bus + "\" class=\"" + (i % 2 ? "0x030200" : "0x020700") +
            "\"/>";
  }
  v.push_back(wide + "</cpu></system>");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> inputs;  // (name, bytes)
  for (int i = 1; i < argc; ++i)
    for (const auto& f : listInputs(argv[i])) inputs.push_back({f, readFile(f)});
  if (inputs.empty()) {
    std::fprintf(stderr, "no seed inputs found\n");
    return 1;
  }
  size_t seeds = inputs.size();
  // Malformed variants of every seed: truncations, and bytes replaced by XML metacharacters.
  for (size_t s = 0; s < seeds; ++s) {
    const std::string text = inputs[s].second;  // a copy: `inputs` grows below
    const std::string name = inputs[s].first;
    if (text.empty()) continue;
    size_t step = std::max<size_t>(1, text.size() / 40);
    for (size_t cut = 0; cut < text.size(); cut += step)
      inputs.push_back({name + " cut " + std::to_string(cut), text.substr(0, cut)});
    const char flips[] = {'<', '>', '"', '/', '=', '\0', '\xff', ' ', '0', '-'};
    uint32_t rng = 12345 + static_cast<uint32_t>(s);
    for (int k = 0; k < 60; ++k) {
      rng = rng * 1664525u + 1013904223u;
      std::string m = text;
      size_t pos = rng % m.size();
      m[pos] = flips[(rng >> 16) % sizeof(flips)];
      inputs.push_back({name + " flip " + std::to_string(pos), m});
    }
    // An element doubled: duplicate bus ids and numa ids.
    size_t a = text.find("<cpu"), b = text.find("</cpu>");
    if (a != std::string::npos && b != std::string::npos && b > a)
      inputs.push_back({name + " doubled cpu",
                        text.substr(0, b + 6) + text.substr(a, b + 6 - a) + text.substr(b + 6)});
  }
  for (const auto& h : hostileInputs()) inputs.push_back({"hostile", h});
  // Every XML seed as the topology two hosts exchange, with GPU and CPU endpoints.
  for (size_t s = 0; s < seeds; ++s) {
    if (inputs[s].first.find(".xml") == std::string::npos) continue;
    std::string xml = inputs[s].second;
    inputs.push_back({inputs[s].first + " as blobs.txt",
                      "weft-topo 1\n1\ncpu:0\nprobe\n" + xml + "\n--rank--\nweft-topo 1\n2\n" +
                          "gpu:0000:06:00.0\nprobe\n" + xml +
                          "\n--rank--\nweft-topo 1\n2\ncpu:1\nx\n" + xml});
  }
  size_t parsed = 0;
  for (const auto& [name, bytes] : inputs) {
    try {
      bool blobs = name.find(".txt") != std::string::npos;
      parsed += blobs ? weft::fuzz::checkTopologyBlobs(bytes) : weft::fuzz::checkTopologyXml(bytes);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: unexpected exception: %s\n", name.c_str(), e.what());
      return 1;
    }
  }
  std::printf("%zu inputs (%zu seeds): %zu read as topologies, %zu refused with an error\n",
              inputs.size(), seeds, parsed, inputs.size() - parsed);
  return 0;
}
